"""The log-signature catalog loads, covers DOMAIN.md's XIDs, and its errors name file and field.

Covers: the shipped catalog loads and every example line in it matches its signature; every
XID DOMAIN.md §2 lists is in the table with a layer from the allowed set; the application
XIDs are exactly the device plugin's; the layer names equal the bottom-up order; `xid_info`
for known and unknown codes; loading errors (bad regex, unknown layer, unknown key, missing
field, layer_from naming no capture group, duplicate name, an example that does not match or
lacks a keyword, not a mapping, bad YAML, missing file) name the file and the field.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from bot.diagnosis.layers import LAYER_ORDER
from bot.diagnosis.logs import (
    UNKNOWN_XID_MEANING,
    LogCatalogError,
    load_log_catalog,
    parse_log_catalog,
    xid_info,
)
from bot.diagnosis.signatures import LayerName
from bot.errors import UserInputError
from runbooks import LOG_SIGNATURES_FILE

CATALOG = load_log_catalog(LOG_SIGNATURES_FILE)
RAW: dict[str, Any] = yaml.safe_load(LOG_SIGNATURES_FILE.read_text(encoding="utf-8"))
FILE = "runbooks/log_signatures.yaml"

DOMAIN_XIDS = [
    8,
    13,
    31,
    32,
    43,
    45,
    48,
    61,
    62,
    63,
    64,
    68,
    69,
    74,
    79,
    92,
    94,
    95,
    109,
    119,
    120,
    121,
    136,
    140,
    143,
    *range(144, 151),
    154,
    155,
]


def test_shipped_catalog_has_every_domain_xid() -> None:
    assert sorted(CATALOG.xids) == DOMAIN_XIDS


def test_every_xid_has_a_layer_from_the_allowed_set() -> None:
    allowed = {layer.value for layer in LAYER_ORDER}
    assert {code: row.layer for code, row in CATALOG.xids.items() if row.layer not in allowed} == {}


def test_application_xids_are_the_device_plugins() -> None:
    assert sorted(c for c, row in CATALOG.xids.items() if row.application) == [
        13,
        31,
        43,
        45,
        68,
        109,
    ]


def test_layer_names_follow_the_bottom_up_order() -> None:
    assert get_args(LayerName) == tuple(layer.value for layer in LAYER_ORDER)


def test_xid_info_gives_the_table_row() -> None:
    row = xid_info(79, CATALOG)
    assert (row.mnemonic, row.layer, row.nvidia_action, row.severity) == (
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        "gpu_hardware",
        "RESTART_BM",
        "critical",
    )
    assert xid_info(74, CATALOG).layer == "fabric"
    assert xid_info(119, CATALOG).layer == "node_software"
    assert xid_info(13, CATALOG).application


def test_xid_info_for_an_unknown_code_has_no_layer() -> None:
    row = xid_info(4242, CATALOG)
    assert (row.code, row.layer, row.meaning) == (4242, None, UNKNOWN_XID_MEANING)


def test_every_example_in_the_catalog_matches_its_signature() -> None:
    # The loader checks this too; here a failing example names itself.
    for spec, sig in zip(RAW["signatures"], CATALOG.signatures, strict=True):
        for example in spec.get("examples", []):
            assert sig.pattern.search(example), f"{sig.name}: {example!r}"


# --- loading errors -------------------------------------------------------------------------


def index_of(name: str) -> int:
    return next(i for i, s in enumerate(RAW["signatures"]) if s["name"] == name)


def load_changed(change: Any) -> str:
    raw = copy.deepcopy(RAW)
    change(raw)
    with pytest.raises(LogCatalogError) as err:
        parse_log_catalog(raw, file=FILE)
    return str(err.value)


def test_bad_regex_names_file_and_field() -> None:
    i = index_of("nccl.ib.no_device")
    message = load_changed(lambda r: r["signatures"][i].update(regex="NET/IB (?P<x"))
    assert message.startswith(f"{FILE}: signatures.{i}.regex: bad regex: ")


def test_unknown_layer_lists_the_valid_layers() -> None:
    message = load_changed(lambda r: r["xids"][48].update(layer="hardware"))
    assert message.startswith(f"{FILE}: xids.48.layer: ")
    assert "'gpu_hardware'" in message and "'workload'" in message


def test_unknown_key_is_rejected() -> None:
    message = load_changed(lambda r: r["signatures"][0].update(layr="fabric"))
    assert message == f"{FILE}: signatures.0.layr: Extra inputs are not permitted"


def test_missing_field_is_named() -> None:
    message = load_changed(lambda r: r["xids"][79].pop("severity"))
    assert message == f"{FILE}: xids.79.severity: Field required"


def test_layer_from_must_name_a_capture_group() -> None:
    i = index_of("kernel.xid")
    message = load_changed(lambda r: r["signatures"][i]["layer_from"].update(field="code"))
    assert message.startswith(f"{FILE}: signatures.{i}.layer_from.field: no capture group 'code'")
    assert "xid" in message


def test_duplicate_signature_name_names_both_entries() -> None:
    message = load_changed(lambda r: r["signatures"][1].update(name=r["signatures"][0]["name"]))
    assert message == (
        f"{FILE}: signatures.1.name: duplicate signature name 'kernel.xid' (also signatures.0)"
    )


def test_example_that_does_not_match_is_named() -> None:
    i = index_of("nccl.ib.no_device")
    message = load_changed(
        lambda r: r["signatures"][i]["examples"].append("No device found anywhere")
    )
    assert message.startswith(f"{FILE}: signatures.{i}.examples.1: does not match")


def test_example_without_a_keyword_is_named() -> None:
    i = index_of("nccl.ib.no_device")
    message = load_changed(lambda r: r["signatures"][i].update(keywords=["NET/Socket"]))
    assert message.startswith(f"{FILE}: signatures.{i}.examples.0: contains none of the keywords")


def test_context_signature_must_be_info() -> None:
    i = index_of("nccl.net.ib_selected")
    message = load_changed(lambda r: r["signatures"][i].update(severity="critical"))
    assert message.startswith(f"{FILE}: signatures.{i}.severity: a context signature")


def test_catalog_must_be_a_mapping() -> None:
    with pytest.raises(LogCatalogError) as err:
        parse_log_catalog(["not", "a", "mapping"], file=FILE)
    assert str(err.value) == f"{FILE}: the catalog must be a YAML mapping"


def test_bad_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "log_signatures.yaml"
    path.write_text("apiVersion: gpu-oncall/v1\nkind: [unclosed\n", encoding="utf-8")
    with pytest.raises(LogCatalogError) as err:
        load_log_catalog(path)
    assert str(err.value).startswith(f"{path}: line ")
    assert "not valid YAML" in str(err.value)


def test_missing_file_is_a_user_input_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(UserInputError) as err:
        load_log_catalog(path)
    assert str(err.value).startswith(f"{path}: cannot read: ")


def test_an_xid_row_citing_an_unknown_source_names_the_row() -> None:
    message = load_changed(lambda r: r["xids"][79].update(sources=["hearsay"]))
    assert message == (
        f"{FILE}: xids.79: unknown source 'hearsay' (sources: domain_md, nvsentinel_csv)"
    )


def test_an_xid_row_with_a_bad_checked_date_names_the_field() -> None:
    message = load_changed(lambda r: r["xids"][79].update(checked="last week"))
    assert message.startswith(f"{FILE}: xids.79.checked: ")

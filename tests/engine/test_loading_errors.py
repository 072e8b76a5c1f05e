"""Runbook loading errors name the file, the step and the field, and say what is valid.

Covers: unknown signal (with a suggestion), unknown step reference, bad CEL expression,
unknown action, unknown layer, duplicate step ids, a step kind missing, unreachable gather
steps, dependency cycles, malformed YAML, and that the shipped runbooks load cleanly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions.registry import default_registry
from bot.engine.catalog import load_catalog
from bot.engine.loading import load_runbook_file, parse_runbook
from bot.errors import RunbookError
from integrations.signals import load_signal_catalog
from runbooks import RUNBOOK_DIR, SIGNALS_FILE

SIGNALS = load_signal_catalog(SIGNALS_FILE).names()
ACTIONS = ["cordon", "drain", "open_ticket", "reboot"]


def runbook(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Runbook",
        "metadata": {"name": "t"},
        "inputs": {"node": {"type": "node", "required": True}},
        "steps": steps,
    }


def load(steps: list[dict[str, Any]]) -> None:
    parse_runbook(runbook(steps), file="runbooks/t.yaml", signals=SIGNALS, actions=ACTIONS)


CHECK = {"id": "hw", "check": "dbe.max > 0.0", "layer": "gpu_hardware", "finding": "x"}


def test_unknown_signal_names_file_step_field_and_suggests() -> None:
    with pytest.raises(RunbookError) as err:
        load([{"id": "dbe", "signal": "gpu.ecc.dbe_rat"}, CHECK])
    message = str(err.value)
    assert message.startswith(
        "runbooks/t.yaml: step 'dbe': field 'signal': unknown signal 'gpu.ecc.dbe_rat'"
    )
    assert "gpu.ecc.dbe_rate" in message


def test_unknown_step_reference_lists_the_steps() -> None:
    with pytest.raises(RunbookError) as err:
        load([{"id": "dbe", "signal": "gpu.ecc.dbe_rate"}, {**CHECK, "check": "dbee.max > 0.0"}])
    assert str(err.value) == (
        "runbooks/t.yaml: step 'hw': field 'check': unknown step 'dbee' (steps: dbe, hw); "
        "did you mean 'dbe'?"
    )


def test_bad_expression_says_where_the_syntax_breaks() -> None:
    with pytest.raises(RunbookError) as err:
        load([{"id": "dbe", "signal": "gpu.ecc.dbe_rate"}, {**CHECK, "check": "dbe.max >"}])
    assert "step 'hw': field 'check': bad expression 'dbe.max >'" in str(err.value)
    assert "1:" in str(err.value)


def test_unknown_action_lists_the_actions() -> None:
    steps = [
        {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
        CHECK,
        {"id": "where", "localize": {}},
        {"id": "fix", "propose": [{"action": "nuke"}]},
    ]
    with pytest.raises(RunbookError) as err:
        load(steps)
    assert (
        "step 'fix': field 'propose.0.action': unknown action 'nuke' (actions: cordon, drain"
        in str(err.value)
    )


def test_unknown_layer_lists_the_layers() -> None:
    with pytest.raises(RunbookError) as err:
        load([{"id": "dbe", "signal": "gpu.ecc.dbe_rate"}, {**CHECK, "layer": "gpu"}])
    assert "field 'layer': unknown layer 'gpu' (layers: facility, fabric, gpu_hardware" in str(
        err.value
    )


def test_duplicate_step_id_is_refused() -> None:
    with pytest.raises(RunbookError, match="step 'dbe': field 'id': duplicate step id"):
        load(
            [
                {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
                {"id": "dbe", "signal": "gpu.ecc.sbe_rate"},
                CHECK,
            ]
        )


def test_step_without_a_kind_names_the_valid_kinds() -> None:
    with pytest.raises(RunbookError) as err:
        load([{"id": "dbe"}])
    assert "step 'dbe'" in str(err.value)
    assert "needs exactly one of signal, cluster, check" in str(err.value)


def test_schema_typo_names_the_step_and_field() -> None:
    with pytest.raises(RunbookError) as err:
        load([{"id": "dbe", "signal": "gpu.ecc.dbe_rate", "widnow": "5m"}, CHECK])
    assert "step 'dbe': field 'widnow'" in str(err.value)


def test_gather_step_nobody_reads_is_unreachable() -> None:
    with pytest.raises(RunbookError, match="step 'sbe': field 'signal': unreachable"):
        load(
            [
                {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
                {"id": "sbe", "signal": "gpu.ecc.sbe_rate"},
                CHECK,
            ]
        )


def test_dependency_cycle_is_reported() -> None:
    steps = [
        {"id": "a", "check": "b.status == 'fired'", "layer": "fabric", "finding": "x"},
        {"id": "b", "check": "a.status == 'fired'", "layer": "fabric", "finding": "x"},
    ]
    with pytest.raises(RunbookError, match="cycle"):
        load(steps)


def test_malformed_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: gpu-oncall/v1\nsteps: [\n  - id: x\n")
    with pytest.raises(RunbookError) as err:
        load_runbook_file(path, signals=SIGNALS, actions=ACTIONS)
    assert str(err.value).startswith(f"{path}: line ")
    assert "not valid YAML" in str(err.value)


def test_macro_variables_are_not_step_references() -> None:
    steps = [
        {"id": "xid", "signal": "gpu.xid.last"},
        {**CHECK, "check": "xid.over_zero.exists(s, s.value == 48.0)"},
    ]
    load(steps)


def test_shipped_runbooks_load_and_have_dependencies() -> None:
    catalog = load_catalog([RUNBOOK_DIR], signals=SIGNALS, actions=default_registry().names())
    assert {
        "ecc-storm",
        "node-diagnose",
        "nccl-hang",
        "mfu-regression",
        "inference-slo-breach",
    } <= set(catalog.names())
    ecc = catalog.get("ecc-storm")
    assert ecc.deps["dbe"] == frozenset()
    assert ecc.deps["dbe_storm"] == frozenset({"dbe"})
    assert "dbe_storm" in ecc.deps["where"]
    assert catalog.for_alert("GPUEccStorm") is not None
    assert catalog.for_command("diagnose") is catalog.get("node-diagnose")
    text = (RUNBOOK_DIR / "ecc-storm.yaml").read_text()
    assert yaml.safe_load(text)["metadata"]["name"] == "ecc-storm"


def test_correlate_source_must_be_a_step() -> None:
    with pytest.raises(RunbookError) as err:
        load(
            [
                {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
                CHECK,
                {
                    "id": "where",
                    "localize": {
                        "correlate": {"sources": ["nodez"], "domains": {"facility": ["rack"]}}
                    },
                },
            ]
        )
    assert str(err.value).startswith(
        "runbooks/t.yaml: step 'where': field 'localize.correlate.sources': unknown step 'nodez'"
    )


def test_correlate_domains_are_keyed_by_layer() -> None:
    with pytest.raises(RunbookError) as err:
        load(
            [
                {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
                {"id": "info", "cluster": "node"},
                CHECK,
                {
                    "id": "where",
                    "localize": {"correlate": {"sources": ["info"], "domains": {"rack": ["r"]}}},
                },
            ]
        )
    assert "field 'localize.correlate.domains.rack': unknown layer 'rack'" in str(err.value)


def test_a_correlate_source_counts_as_read() -> None:
    load(
        [
            {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
            {"id": "info", "cluster": "node"},
            {**CHECK, "culprit": {"nodes": "{{ dbe.over_zero_nodes | join(',') }}"}},
            {
                "id": "where",
                "localize": {"correlate": {"sources": ["info"], "domains": {"facility": ["rack"]}}},
            },
        ]
    )


def test_a_storm_runbook_needs_a_nodes_input() -> None:
    document = runbook([{"id": "dbe", "signal": "gpu.ecc.dbe_rate"}, CHECK])
    document["triggers"] = {"storms": ["GPUEccStorm"]}
    with pytest.raises(RunbookError) as err:
        parse_runbook(document, file="runbooks/t.yaml", signals=SIGNALS, actions=ACTIONS)
    assert str(err.value) == (
        "runbooks/t.yaml: field 'triggers.storms': a runbook with 'triggers.storms' needs an "
        "input 'nodes' of type nodes (the storm's member nodes)"
    )

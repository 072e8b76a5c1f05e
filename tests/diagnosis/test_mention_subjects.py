"""Prose that names a node or a GPU (issue 22 item 8), and nvidia-smi's default table.

A colleague's summary ("gpu-node-07 fell off the bus") gives a low-confidence verdict labelled
as coming from a mention, naming the node or GPU its clause names; text that names software
(`nvidia-driver-535`, `cuda-12`) or a GPU model names no node. In the nvidia-smi table an
`ERR!` fan cell is a fault on that GPU (where other fans read), an `ERR!` power reading only
context. Property tests
build the sentences and tables from generated names and cells.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.diagnosis.evidence import smi_table
from bot.diagnosis.evidence.model import SourceText
from bot.diagnosis.evidence.pasting import classify_paste
from bot.diagnosis.evidence.subjects import clause_around, named_nodes, subjects
from bot.diagnosis.layers import Layer, Severity
from tests.diagnosis.evidence_helpers import CATALOG

RELAXED = settings(max_examples=100, deadline=None)
HOSTS = st.builds(
    lambda prefix, rack, num: f"{prefix}-{rack}{num:02d}",
    st.sampled_from(["gpu-node", "dgx", "hgx-h100", "compute", "worker", "node", "a3-mega"]),
    st.sampled_from(["", "r1-", "07-"]),
    st.integers(min_value=0, max_value=999),
)
TERMS = st.sampled_from([
    ("fell off the bus", "gpu_hardware"),
    ("came up short a GPU", "gpu_hardware"),
    ("hit its power brake", "facility"),
    ("shows XID 79", "gpu_hardware"),
    ("has a flapping IB link", "fabric"),
])


@RELAXED
@given(host=HOSTS, term=TERMS, lead=st.sampled_from(["", "fyi: ", "Heads up, "]))
def test_a_mention_names_the_node_its_clause_names(
    host: str, term: tuple[str, str], lead: str
) -> None:
    said, layer = term
    report = classify_paste(f"{lead}{host} {said}.", catalog=CATALOG, source="chat").evidence
    assert (report.layer.value, report.status) == (layer, "mention")
    assert report.culprits == (host,)
    assert report.confidence <= 0.3
    assert report.summary.startswith("from a mention, not from tool output")


def test_a_gpu_and_its_node_in_one_clause_are_one_target() -> None:
    report = classify_paste(
        "XID 79 on GPU 3 of dgx-a100-03 after the nvidia-driver-535 rollout.",
        catalog=CATALOG,
        source="chat",
    ).evidence
    assert report.culprits == ("dgx-a100-03 / GPU 3",)


def test_each_term_keeps_the_subject_of_its_own_clause() -> None:
    text = "the rack hit its power brake, then XID 79 on gpu-3"
    report = classify_paste(text, catalog=CATALOG, source="chat").evidence
    assert report.layer is Layer.FACILITY and report.culprits == ()  # the brake names nothing
    xid = next(f for f in report.findings if f.layer is Layer.GPU_HARDWARE)
    assert xid.target.gpu_index == "3" and xid.target.node is None


@RELAXED
@given(word=st.sampled_from(["nvidia-driver-535", "cuda-12", "x86-64", "H100", "on a100",
                             "gpu-3", "ubuntu-22", "release 535.104", "rank-0"]))
def test_software_parts_and_gpus_are_not_nodes(word: str) -> None:
    assert named_nodes(f"after the {word} upgrade the job hung") == []


@RELAXED
@given(text=st.text(max_size=300), start=st.integers(0, 300), width=st.integers(0, 40))
def test_subjects_and_clauses_take_any_text(text: str, start: int, width: int) -> None:
    start = min(start, len(text))
    end = min(start + width, len(text))
    clause = clause_around(text, start, end)
    assert text[start:end] in clause and clause in text
    for target in subjects(clause):
        assert target.node or target.gpu_index or target.uuid


FANS = st.sampled_from(["30%", " 0%", "ERR!"])
POWERS = st.sampled_from(["99W /  130W", "ERR! /  130W"])


def _table(cells: list[tuple[str, str]]) -> str:
    rows = []
    for i, (fan, power) in enumerate(cells):
        rows += [
            "+-----------------------------------------+------------------------+----------------------+",
            f"|  {i:2d}  NVIDIA RTX 4000 Ada Gene...    On  |   00000000:{i + 16:02X}:00.0 Off |"
            "                  Off |",
            f"|{fan:>4}   68C    P2          {power:>12} |       1MiB /  20475MiB |"
            "     93%      Default |",
        ]
    return "\n".join(rows)


@RELAXED
@given(cells=st.lists(st.tuples(FANS, POWERS), min_size=1, max_size=8))
def test_an_err_fan_is_a_fault_on_its_gpu_and_other_err_cells_are_context(
    cells: list[tuple[str, str]],
) -> None:
    parsed = smi_table.parse(SourceText(_table(cells), source="smi"))
    assert parsed is not None and len(parsed.inventory) == len(cells)
    faults = {f.target.gpu_index for f in parsed.findings if f.severity is Severity.WARNING}
    # a fan reads ERR! where fans can be read (another GPU shows a percentage, or it is the
    # only GPU); every fan ERR! on a multi-GPU table is NVML, not one fan: context
    fans_read = len(cells) == 1 or any(fan != "ERR!" for fan, _ in cells)
    erred = {str(i) for i, (fan, _) in enumerate(cells) if fan == "ERR!"}
    assert faults == (erred if fans_read else set())
    for finding in parsed.findings:
        assert finding.layer is Layer.GPU_HARDWARE
        assert finding.context == (finding.severity is Severity.INFO)

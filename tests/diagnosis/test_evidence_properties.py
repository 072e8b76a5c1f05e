"""Property tests: every evidence parser takes any text and answers with a result (or None for
"not my format"), never an exception; the paste classifier always gives a known status.

Covers: nvidia-smi -q (with and without its GPU header), nvidia-smi's default table, perfquery
and ibqueryerrors (behind their literal pre-filters), kubectl YAML/describe fragments,
dcgm-exporter exposition text, dcgmi nvlink status, driver versions, prose mentions, the log
catalog, and `classify_paste` over text built from real format fragments, arbitrary unicode,
odd indentation, prompts and wrapped lines. Hypothesis deadlines are off: nothing here is timed.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.diagnosis.evidence import (
    dcgmi,
    dcgmi_nvlink,
    driver_versions,
    exposition,
    infiniband,
    kubernetes,
    mentions,
    nvidia_smi,
    nvlink,
    smi_table,
    vllm,
)
from bot.diagnosis.evidence.model import Parsed, SourceText
from bot.diagnosis.evidence.pasting import classify_paste
from bot.diagnosis.layers import Layer
from bot.diagnosis.logs import classify_text
from tests.diagnosis.evidence_helpers import CATALOG

#: pieces of the formats the parsers look for, to be glued into hostile shapes
FRAGMENTS = [
    "GPU 00000000:3B:00.0",
    "    Remapped Rows",
    "        Pending                           : Yes",
    "        Uncorrectable Error               : 4",
    "    Clocks Event Reasons",
    "        HW Slowdown                       : Active",
    "        HW Power Brake Slowdown           : Active",
    "    ECC Errors",
    "        Volatile",
    "            DRAM Uncorrectable            : 7",
    "status:",
    "  allocatable:",
    '    nvidia.com/gpu: "7"',
    "  capacity:",
    '    nvidia.com/gpu: "8"',
    "kind: Node",
    "Capacity:",
    "Allocatable:",
    "  nvidia.com/gpu:     8",
    "Name:               gpu-node-1",
    "Conditions:",
    '# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.',
    'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-1",Hostname="dcgm-exporter-abcde",pod=""} 79',
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",pod="",namespace=""} 44',
    'DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="1",pci_bus_id="00000000:3B:00.0"} 1e0',
    "|  NvLink Link Status  |",
    "    gpuId 0:",
    "        D D U X _",
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 2022",
    "ii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface",
    "| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |",
    "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.",
    "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
    "XIDs 119 and 120 on 3 nodes after the driver upgrade",
    "the rack hit its power brake",
    "| Diagnostic                | Result                                         |",
    "|  14  NVIDIA RTX 4000 Ada Gene...    On  |   00000000:CC:00.0 Off |                  Off |",
    "|ERR!   68C    P2             99W /  130W |       1MiB /  20475MiB |     93%      Default |",
    "| N/A   29C    P0   ERR! / 250W |    593MiB / 16160MiB |      0%      Default |",
    "# Port counters: Lid 5 port 1",
    "SymbolErrorCounter:..............6",
    'Errors for "gpu-node-1 mlx5_0"',
    "   GUID 0x506b4b0300c0a1b2 port ALL: [LinkDownedCounter == 3]",
    "| Memory                    | Fail                                           |",
    "$ ",
    "# ",
    "",
    "    ",
    "\t",
]
LINES = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=80))
PREFIX = st.sampled_from(
    ["", "$ ", "# ", "    ", "\t", "> ", "[ 1843.308145] ", "Dec  2 11:49:53 "]
)
TEXTS = st.one_of(
    st.text(max_size=400),
    st.lists(st.tuples(PREFIX, LINES), max_size=25).map(
        lambda rows: "\n".join(prefix + line for prefix, line in rows)
    ),
)
PARSERS: list[Callable[[SourceText], Parsed | None]] = [
    nvidia_smi.parse,
    kubernetes.parse_yaml,
    kubernetes.parse_describe,
    dcgmi.parse,
    dcgmi_nvlink.parse,
    driver_versions.parse,
    nvlink.parse,
    vllm.parse,
    smi_table.parse,
    infiniband.parse_perfquery,
    infiniband.parse_ibqueryerrors,
    lambda src: exposition.parse(src, catalog=CATALOG),
    lambda src: mentions.parse(src, catalog=CATALOG),
]
RELAXED = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@RELAXED
@given(text=TEXTS)
def test_every_parser_answers_any_text_with_a_result_or_none(text: str) -> None:
    src = SourceText(text, source="paste")
    for parser in PARSERS:
        parsed = parser(src)
        assert parsed is None or isinstance(parsed, Parsed)
        for finding in parsed.findings if parsed else ():
            assert finding.layer is not Layer.NONE
            assert all(0 <= line.line_no <= len(src.lines) for line in finding.lines)


@RELAXED
@given(text=TEXTS)
def test_the_log_catalog_classifies_any_text(text: str) -> None:
    found = classify_text(text, CATALOG)
    assert found.layer is None or found.layer in {layer.value for layer in Layer}


@RELAXED
@given(text=TEXTS)
def test_classify_paste_always_gives_a_known_status(text: str) -> None:
    verdict = classify_paste(text, catalog=CATALOG, source="paste")
    assert verdict.evidence.status in {"fault", "mention", "healthy", "unrecognised"}
    no_fault = verdict.evidence.status in {"healthy", "unrecognised"}
    if verdict.report is not None:  # a tool output or a mention decides
        assert (verdict.layer is None) == no_fault
    else:  # log lines only: the catalog decides, and agrees with the evidence report
        assert verdict.layer == verdict.classification.layer
        assert (verdict.layer is None) == (verdict.evidence.status != "fault")
    if verdict.evidence.status == "mention":
        assert verdict.evidence.confidence <= 0.3
    assert len(verdict.evidence.not_understood) <= 20

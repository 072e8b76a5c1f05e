"""What people really paste (issue 22, items 6-9): fragments and variants, prose mentions, and
the report saying what was understood.

Covers: an nvidia-smi -q section without its GPU header is read by content; a node `status:`
fragment and a Capacity/Allocatable block without Name: are judged; dcgm-exporter exposition
text (Hostname = exporter pod, empty pod labels on a busy GPU, last XID); dcgmi nvlink link
status; kernel module vs user-space driver versions; quoted pastes; ibqueryerrors `port ALL`;
prose mentions are low-confidence, labelled, deduplicated and never used when a tool output is
recognised; healthy vs recognised-nothing. Lines are verbatim from the corpus's public sources.
"""

from __future__ import annotations

from bot.diagnosis.evidence import recognize
from bot.diagnosis.evidence.pasting import classify_paste
from bot.diagnosis.layers import Layer
from tests.diagnosis.evidence_helpers import CATALOG


def verdict_of(text: str) -> tuple[str | None, str, tuple[str, ...]]:
    found = classify_paste(text, catalog=CATALOG, source="paste")
    codes = tuple(f.code for f in found.evidence.deciding)
    return found.layer, found.evidence.status, codes


def test_remapped_rows_without_the_gpu_header_is_read_by_content() -> None:
    text = (
        "    Remapped Rows\n"
        "        Correctable Error                 : 0\n"
        "        Uncorrectable Error               : 4\n"
        "        Pending                           : Yes\n"
    )
    layer, status, codes = verdict_of(text)
    assert (layer, status) == ("gpu_hardware", "fault")
    assert "nvidia_smi.row_remap_pending" in codes


def test_an_idle_clock_section_behind_a_prompt_is_healthy() -> None:
    text = (
        "$ nvidia-smi -q | grep -A8 'Clocks Throttle'\n"
        "    Clocks Throttle Reasons\n"
        "        Idle                        : Active\n"
        "        HW Slowdown                 : Not Active\n"
    )
    assert verdict_of(text)[:2] == (None, "healthy")


def test_an_indented_status_fragment_with_fewer_allocatable_gpus_is_kubernetes() -> None:
    text = (
        "    status:\n      allocatable:\n        nvidia.com/gpu: \"0\"\n"
        "      capacity:\n        nvidia.com/gpu: \"16\"\n"
    )
    assert verdict_of(text)[::2] == ("kubernetes", ("k8s.gpu_unallocatable",))


def test_capacity_and_allocatable_blocks_without_a_name_are_judged() -> None:
    text = "Capacity:\n  nvidia.com/gpu:     8\nAllocatable:\n  nvidia.com/gpu:     7\n"
    assert verdict_of(text)[0] == "kubernetes"


def test_exporter_hostname_that_is_its_pod_name_is_telemetry() -> None:
    text = (
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-55274b56",device="nvidia0",'
        'Hostname="dcgm-exporter-lcxpl",container="",namespace="",pod=""} 135\n'
    )
    assert verdict_of(text)[::2] == ("telemetry", ("exporter.hostname_is_pod_name",))


def test_exporter_last_xid_takes_the_xid_tables_layer_and_names_the_node() -> None:
    text = 'DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-9",Hostname="gpu-node-17"} 79\n'
    report = recognize([("metrics", text)], catalog=CATALOG)
    assert report.layer is Layer.GPU_HARDWARE
    assert report.culprits == ("gpu-node-17 / GPU 3 / GPU-9",)


def test_healthy_exporter_samples_are_recognised_as_healthy() -> None:
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-7",Hostname="k8s-gpu1"} 0\n'
    assert verdict_of(text)[:2] == (None, "healthy")


def test_dcgmi_links_down_are_fabric() -> None:
    text = "|  NvLink Link Status  |\nGPUs:\n    gpuId 0:\n        D D D D\n    gpuId 1:\n" \
           "        U U U U\n"
    report = recognize([("dcgmi", text)], catalog=CATALOG)
    assert report.layer is Layer.FABRIC
    assert [f.summary for f in report.deciding] == ["4 of 4 NVLinks down on GPU 0"]


def test_kernel_module_and_user_space_versions_that_differ_are_node_software() -> None:
    text = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  520.56.06  Thu Oct  6 21:38:55 UTC 2022\n"
        "ii  nvidia-smi     525.85.12-1  amd64        NVIDIA System Management Interface\n"
    )
    assert verdict_of(text)[::2] == ("node_software", ("driver.version_skew",))


def test_the_same_version_on_both_sides_is_no_fault() -> None:
    text = "| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2 |\n"
    assert verdict_of(text)[0] is None


def test_a_quoted_paste_is_read_without_its_quote_marks() -> None:
    text = (
        "> # ibqueryerrors\n"
        '> Errors for 0x2c903006e29b0 "MF0;ys23ib4:SX6036/U1"\n'
        ">    GUID 0x2c903006e29b0 port ALL: [LinkErrorRecoveryCounter == 15] "
        "[LinkDownedCounter == 48]\n"
    )
    layer, status, codes = verdict_of(text)
    assert (layer, status) == ("fabric", "fault")
    assert "ib.link_downed" in codes


def test_prose_gives_a_low_confidence_verdict_labelled_as_a_mention() -> None:
    found = classify_paste(
        "XIDs 119 and 120 on 3 nodes after the driver upgrade", catalog=CATALOG, source="chat"
    )
    assert (found.layer, found.evidence.status) == ("node_software", "mention")
    assert found.evidence.confidence <= 0.3
    assert found.evidence.summary.startswith("from a mention, not from tool output")
    assert len({f.summary for f in found.evidence.deciding}) == len(found.evidence.deciding)


def test_the_lowest_mentioned_layer_wins_and_explanations_stay_healthy() -> None:
    assert verdict_of("the rack hit its power brake, then XID 79 on gpu-3")[0] == "facility"
    healthy = "Capacity —> total # GPUs, Allocatable —> # healthy GPUs."
    assert verdict_of(healthy)[:2] == (None, "unrecognised")


def test_mentions_are_not_read_when_a_tool_output_is_recognised() -> None:
    text = (
        "we saw XID 79 last week, all fine now:\n"
        "    Remapped Rows\n        Pending                           : No\n"
    )
    assert verdict_of(text)[:2] == (None, "healthy")

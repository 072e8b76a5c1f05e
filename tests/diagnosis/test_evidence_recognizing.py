"""The dispatcher: which formats a text holds, all findings, and one verdict; XID chains and
the XID catalog it reads (one source of truth with bot.diagnosis.logs).

Covers: one text holding nvidia-smi -q, ibstat and a kernel log is recognised as all three; the
verdict is the lowest layer with strong evidence; a bug report names the culprit by node, index,
PCI bus id and UUID (from nvidia-smi and NVRM's `GPU at PCI` line); a chain line alone is the
earlier XID's fault; XID 79 with NCCL status=12 is gpu_hardware and the IB errors are context;
info-only text gives no fault; nothing recognised; the XID rows carry sources and dates, the
NVLink family is fabric, application XIDs stay off the hardware path, and the XIDs where tools
disagree carry a documented choice.
"""

from __future__ import annotations

from bot.diagnosis.evidence import recognize
from bot.diagnosis.layers import Layer
from bot.diagnosis.logs import xid_info
from tests.diagnosis.evidence_helpers import CATALOG, fixture, report_of


def test_one_text_holding_three_tools_is_recognised_as_all_three() -> None:
    text = "\n".join(
        fixture(name)
        for name in ("ibstat-healthy.txt", "nvidia-smi-q-faulty.txt", "dmesg-mlx5-cable.txt")
    )
    report = recognize([("pasted", text)], catalog=CATALOG)
    assert {fmt for _, fmt in report.formats} == {"ibstat", "nvidia-smi -q", "kernel log"}
    # facility (power brake) < fabric (cable) < gpu_hardware (remap failure): lowest strong wins
    assert report.layer is Layer.FACILITY
    assert report.culprits == ("GPU 3 / 0000:5d:00.0 / GPU-e84b21d7-96c3-4f0a-b5e2-31d9c07a8f45",)
    assert [layer.value for layer, _ in report.ranked][:1] == ["facility"]
    assert {f.layer for f in report.findings} >= {Layer.FABRIC, Layer.GPU_HARDWARE}


def test_bug_report_names_the_culprit_gpu_every_way() -> None:
    report = report_of("nvidia-bug-report.log")
    assert report.layer is Layer.GPU_HARDWARE
    assert report.culprits == (
        "gpu-node-17 / GPU 1 / 0000:2a:00.0 / GPU-91a7e3c4-7be0-4c6e-a1d9-2f0c8e55b6d2",
    )
    xid48 = next(f for f in report.deciding if f.code == "kernel.xid.48")
    assert [line.cite() for line in xid48.lines] == [
        "nvidia-bug-report.log:33",
        "nvidia-bug-report.log:46",
    ]


def test_a_chain_line_alone_is_the_earlier_xids_fault() -> None:
    report = report_of("dmesg-chain-only.txt")
    assert report.layer is Layer.FABRIC
    assert report.deciding[0].summary.startswith("Xid 45 caused by previous Xid 149")


def test_the_primary_xid_decides_over_its_chain() -> None:
    report = report_of("dmesg-xid-chain.txt")
    assert (report.layer, report.deciding[0].code) == (Layer.FABRIC, "kernel.xid.149")
    assert report.deciding[0].target.link == "13"
    assert all(f.context for f in report.findings if f.code == "kernel.xid.45")


def test_xid_79_with_nccl_status_12_is_the_gpu_that_fell_off_the_bus() -> None:
    report = report_of("nccl-xid79-status12.log")
    assert report.layer is Layer.GPU_HARDWARE
    assert report.culprits == ("0000:3a:00.0 / GPU-0c3d8a19-52f6-4e27-8b04-d7a9e1c46f30",)
    ib = [f for f in report.findings if f.code == "nccl.ib.completion_error"]
    assert len(ib) == 2 and all(f.context for f in ib)


def test_gsp_timeout_and_socket_fallback_layers() -> None:
    assert report_of("dmesg-gsp-timeout.txt").layer is Layer.NODE_SOFTWARE
    assert report_of("dmesg-gsp-timeout.txt").culprits == ("GPU 6",)
    assert report_of("nccl-socket-fallback.log").layer is Layer.KUBERNETES


def test_info_only_findings_are_no_fault() -> None:
    report = report_of("nvidia-smi-q-healthy.txt", "nvlink-e-healthy.txt", "ibstat-healthy.txt")
    assert report.layer is Layer.NONE
    assert report.summary.startswith("recognised 3 output(s), all healthy (")
    assert report.status == "healthy"
    assert len(report.findings) == 3  # the info findings are still listed


def test_nothing_recognised() -> None:
    report = recognize([("notes.txt", "all quiet on the cluster\n")], catalog=CATALOG)
    assert (report.layer, report.formats, report.recognized) == (Layer.NONE, (), False)
    assert report.status == "unrecognised"
    assert [line.cite() for line in report.not_understood] == ["notes.txt:1"]
    assert report.to_dict()["not_understood"][0]["text"] == "all quiet on the cluster"


# --- the XID catalog ------------------------------------------------------------------------


def test_every_xid_row_names_its_sources_and_the_day_it_was_checked() -> None:
    for code, row in CATALOG.xids.items():
        assert row.sources and row.checked == "2026-11-24", code
        assert row.fatal is not None, code


def test_nvlink_family_is_the_fabric_and_nvlink5_decodes_fatal_vs_nonfatal() -> None:
    for code in (74, 136, 144, 145, 146, 147, 148, 149, 150, 155):
        assert xid_info(code, CATALOG).layer == "fabric", code
    assert all(xid_info(c, CATALOG).nonfatal_severity == "warning" for c in range(144, 151))


def test_application_xids_stay_off_the_hardware_path() -> None:
    for code in (13, 31, 43, 45, 68, 109):
        row = xid_info(code, CATALOG)
        assert row.application and row.layer == "workload", code


def test_xids_where_tools_disagree_carry_a_documented_choice() -> None:
    for code in (31, 45, 63, 74, 79, 92, 94):
        assert "chosen" in (xid_info(code, CATALOG).choice or ""), code

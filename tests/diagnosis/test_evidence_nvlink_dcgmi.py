"""`nvidia-smi nvlink -e/-s` and `dcgmi diag` evidence.

Covers: NVLink CRC/recovery errors are a fabric warning on the GPU and link, replays alone are
info; an inactive link beside active ones is critical; a healthy `-e` decides nothing; dcgmi
diag failures name the GPU, category and the rejoined error text, a deployment warning is
node_software, an all-pass table gives no finding, and a non-table text is not recognised.
"""

from __future__ import annotations

from bot.diagnosis.evidence import dcgmi, nvlink
from bot.diagnosis.evidence.model import SourceText
from bot.diagnosis.layers import Layer, Severity
from tests.diagnosis.evidence_helpers import fixture


def parsed(module: object, name: str) -> list[tuple[str, str, str, str | None, str | None]]:
    result = module.parse(SourceText(fixture(name), source=name))  # type: ignore[attr-defined]
    assert result is not None
    return [
        (f.code, f.layer.value, f.severity.value, f.target.gpu_index, f.target.link)
        for f in result.findings
    ]


def test_nvlink_crc_and_recovery_errors_are_a_fabric_warning_on_the_link() -> None:
    assert parsed(nvlink, "nvlink-e-errors.txt") == [
        ("nvlink.errors", "fabric", "warning", "2", "7"),
        ("nvlink.replays", "fabric", "info", "2", "8"),
    ]


def test_nvlink_healthy_counters_give_only_context() -> None:
    assert parsed(nvlink, "nvlink-e-healthy.txt") == [
        ("nvlink.replays", "fabric", "info", "1", "3")
    ]


def test_an_inactive_link_beside_active_ones_is_critical() -> None:
    result = nvlink.parse(SourceText(fixture("nvlink-s-inactive.txt"), source="s"))
    assert result is not None
    (finding,) = result.findings
    assert (finding.code, finding.severity, finding.target.link) == (
        "nvlink.link_inactive",
        Severity.CRITICAL,
        "11",
    )
    assert finding.target.uuid == "GPU-e84b21d7-96c3-4f0a-b5e2-31d9c07a8f45"
    assert finding.lines[-1].text.strip() == "Link 11: <inactive>"


def test_a_gpu_whose_links_are_all_inactive_is_not_a_fault() -> None:
    text = "GPU 0: NVIDIA L40S (UUID: GPU-aa)\n\t Link 0: <inactive>\n\t Link 1: <inactive>\n"
    result = nvlink.parse(SourceText(text, source="s"))
    assert result is not None and result.findings == ()


def test_dcgmi_failures_name_gpu_category_and_error_text() -> None:
    result = dcgmi.parse(SourceText(fixture("dcgmi-diag-fail.txt"), source="diag"))
    assert result is not None
    rows = [
        (f.summary.split(":")[0].removeprefix("dcgmi diag "), f.layer, f.severity, gpu)
        for f in result.findings
        if (gpu := f.target.gpu_index) is not None
    ]
    hw, crit = Layer.GPU_HARDWARE, Severity.CRITICAL
    assert rows == [
        ("Deployment / Persistence Mode", Layer.NODE_SOFTWARE, Severity.WARNING, "0"),
        ("Deployment / Page Retirement/Row Remap", hw, crit, "1"),
        ("Integration / PCIe", hw, crit, "1"),
        ("Hardware / GPU Memory", hw, crit, "1"),
    ]
    pcie = result.findings[2]
    assert "link width 8X, which is below the minimum allowed link width of 16X" in pcie.summary
    assert [line.line_no for line in pcie.lines] == [27, 28, 29, 30]


def test_dcgmi_all_pass_is_recognised_without_findings() -> None:
    result = dcgmi.parse(SourceText(fixture("dcgmi-diag-pass.txt"), source="diag"))
    assert result is not None and result.findings == ()


def test_text_without_a_diag_table_is_not_dcgmi() -> None:
    assert dcgmi.parse(SourceText("| a | b |\n", source="x")) is None

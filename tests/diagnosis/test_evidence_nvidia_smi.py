"""`nvidia-smi -q` evidence: ECC, remapped rows, retired pages, reset status, clock-event
reasons, temperatures and the PCIe link, per GPU named by index, PCI bus id and UUID.

Covers: a healthy 4-GPU H100 output (only the info power cap); a faulty one (GPU 1 remap
failure + volatile DBE + reset required, GPU 2 x8 link, GPU 3 power brake, each on its own GPU
with the cited lines); the older driver layout (Clocks Throttle Reasons, Single/Double Bit,
absolute temperatures, pending page retirement); PCIe gen lowered while idle is info only.
"""

from __future__ import annotations

from bot.diagnosis.evidence import EvidenceFinding
from bot.diagnosis.evidence.model import SourceText
from bot.diagnosis.evidence.nvidia_smi import parse
from bot.diagnosis.layers import Layer, Severity
from tests.diagnosis.evidence_helpers import fixture

H100_GPU1 = "GPU-91a7e3c4-7be0-4c6e-a1d9-2f0c8e55b6d2"


def findings(name: str) -> dict[str, EvidenceFinding]:
    parsed = parse(SourceText(fixture(name), source=name))
    assert parsed is not None and parsed.format == "nvidia-smi -q"
    return {f.code: f for f in parsed.findings}


def test_healthy_output_has_only_context_findings() -> None:
    found = findings("nvidia-smi-q-healthy.txt")
    assert list(found) == ["nvidia_smi.sw_power_cap"]
    assert found["nvidia_smi.sw_power_cap"].severity is Severity.INFO


def test_healthy_output_lists_every_gpu_in_the_inventory() -> None:
    parsed = parse(SourceText(fixture("nvidia-smi-q-healthy.txt"), source="q"))
    assert parsed is not None
    assert [(t.gpu_index, t.pci) for t in parsed.inventory] == [
        ("0", "0000:18:00.0"),
        ("1", "0000:2a:00.0"),
        ("2", "0000:3a:00.0"),
        ("3", "0000:5d:00.0"),
    ]


def test_remap_failure_and_volatile_dbe_are_critical_on_their_gpu() -> None:
    found = findings("nvidia-smi-q-faulty.txt")
    failure = found["nvidia_smi.row_remap_failure"]
    assert (failure.layer, failure.severity) == (Layer.GPU_HARDWARE, Severity.CRITICAL)
    assert (failure.target.gpu_index, failure.target.uuid) == ("1", H100_GPU1)
    assert "Remapping Failure Occurred" in failure.lines[-1].text
    assert failure.lines[0].text == "GPU 00000000:2A:00.0"
    dbe = found["nvidia_smi.ecc_uncorrectable_volatile"]
    assert dbe.summary.startswith("2 uncorrectable ECC error(s)")
    assert found["nvidia_smi.reset_required"].severity is Severity.CRITICAL
    assert found["nvidia_smi.row_remap_pending"].severity is Severity.WARNING


def test_narrow_pcie_link_and_power_brake_name_their_gpus() -> None:
    found = findings("nvidia-smi-q-faulty.txt")
    width = found["nvidia_smi.pcie_width_degraded"]
    assert (width.target.gpu_index, width.summary[:24]) == ("2", "PCIe link width x8 of x1")
    brake = found["nvidia_smi.hw_power_brake"]
    assert (brake.layer, brake.severity, brake.target.gpu_index) == (
        Layer.FACILITY,
        Severity.CRITICAL,
        "3",
    )
    assert "hw_slowdown" not in {c.split(".")[1] for c in found}  # folded into the brake


def test_older_driver_layout_is_read_too() -> None:
    found = findings("nvidia-smi-q-v100-thermal.txt")
    assert found["nvidia_smi.hw_thermal_slowdown"].target.gpu_index == "0"
    assert found["nvidia_smi.temperature_slowdown"].summary.startswith("GPU at 88 C")
    assert found["nvidia_smi.ecc_uncorrectable_volatile"].target.gpu_index == "1"
    assert found["nvidia_smi.page_retirement_pending"].severity is Severity.WARNING
    assert found["nvidia_smi.retired_pages"].summary.startswith("1 page(s) retired for double")


def test_pcie_gen_lowered_while_idle_is_only_context() -> None:
    found = parse(SourceText(fixture("nvidia-smi-q-idle-gen.txt"), source="q"))
    assert found is not None
    assert {(f.code, f.severity) for f in found.findings} == {
        ("nvidia_smi.pcie_gen_degraded", Severity.INFO)
    }


def test_text_without_gpu_blocks_is_not_recognised() -> None:
    assert parse(SourceText("Attached GPUs : 0\n", source="q")) is None

"""`nccl-hang`, `mfu-regression` and `inference-slo-breach` read NVLink and PCIe signals.

Covers: an NVLink fault that shows only as XID 74 (dcgm-exporter's default CSV) localizes to
`fabric` at the GPU, not `gpu_hardware`, and the NVLink counter check is *unknown* (its counters
were never read), not passed; with the counters enabled the counter check fires too; other
hardware XIDs still go to `gpu_hardware` and name their own GPU; a PCIe-degraded GPU under a
training job or an inference replica is a `gpu_hardware` verdict naming that GPU (never "no
fault found"), by its replay rate, or by a link width below its peers' when the width fields
are exported; healthy jobs and services stay healthy with the new checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.diagnosis.logs import load_log_catalog
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import load_catalogs, open_runtime
from simulator.scenarios import Scenario, load_scenario, parse_scenario
from runbooks import LOG_SIGNATURES_FILE

NCCL = {"alert": {"alertname": "NCCLCollectiveHang", "labels": {"job": "llm-pretrain"}}}
MFU = {"alert": {"alertname": "TrainingMFURegression", "labels": {"job": "llm-pretrain"}}}
SLO = {"alert": {"alertname": "InferenceSLOBurnRate", "labels": {"service": "vllm-chat"}}}


def run(settings: Settings, scenario: Scenario) -> dict[str, Any]:
    """The run's step outputs, triggered the production way (the scenario's expect unread)."""
    eval_settings = isolated(settings)
    blind = scenario.model_copy(update={"expect": None})
    with open_runtime(
        eval_settings,
        scenario=blind,
        fresh=True,
        catalogs=load_catalogs(eval_settings),
        log_catalog=load_log_catalog(LOG_SIGNATURES_FILE),
    ) as rt:
        triggered = trigger(rt, blind)
    assert triggered.outcome is not None, triggered.error
    return triggered.outcome.steps


def fleet(
    faults: list[dict[str, Any]], trigger: dict[str, Any], *, counters: str = "default"
) -> Scenario:
    return parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": "t"},
            "fleet": {
                "nodes": 32,
                "dcgm_counters": counters,
                "workloads": [
                    {"kind": "training", "name": "llm-pretrain", "nodes": "gpu-node-[00-15]"},
                    {"kind": "inference", "name": "vllm-chat", "nodes": "gpu-node-[24-27]"},
                ],
            },
            "faults": faults,
            "trigger": trigger,
        }
    )


def culprit_gpus(verdict: dict[str, Any]) -> set[tuple[str, str]]:
    return {(c["node"], c["gpu"]) for c in verdict["culprit_details"] if c.get("gpu")}


def test_an_nvlink_fault_seen_only_as_xid_74_is_fabric_at_the_gpu(
    settings: Settings, scenario_dir: Path
) -> None:
    scenario = load_scenario(scenario_dir / "nccl-hang-nvlink-xid74-default-counters.yaml")
    steps = run(settings, scenario)
    verdict = steps["where"]
    assert verdict["layer"] == "fabric"
    assert culprit_gpus(verdict) == {("gpu-node-21", "6")}
    assert steps["nvlink_xid"]["status"] == "fired"
    assert steps["hw_xid"]["status"] == "passed"  # 74 is not an HBM / GPU-board XID
    assert steps["nvlink_errors"]["status"] == "unknown"  # counters off: never read
    assert "fabric.nvlink.error_rate" in steps["nvlink_errors"]["missing_signals"]


def test_nvlink_counters_fire_when_the_exporter_exports_them(settings: Settings) -> None:
    fault = {"kind": "nvlink_errors", "node": "gpu-node-04", "gpu": 3, "intensity": 0.5}
    steps = run(settings, fleet([fault | {"start": "-25m"}], MFU, counters="all"))
    assert steps["nvlink_errors"]["status"] == "fired"
    assert steps["where"]["layer"] == "fabric"
    assert culprit_gpus(steps["where"]) == {("gpu-node-04", "3")}


def test_another_hardware_xid_names_its_own_gpu(settings: Settings) -> None:
    faults = [
        {"kind": "xid", "code": 48, "node": "gpu-node-06", "gpu": 1, "start": "-5m"},
        {"kind": "xid", "code": 13, "node": "gpu-node-02", "gpu": 7, "start": "-5m"},
    ]
    steps = run(settings, fleet(faults, NCCL))
    assert steps["hw_xid"]["status"] == "fired"
    assert steps["hw_xid"]["finding"]["culprit"] == {"node": "gpu-node-06", "gpu": "1"}
    assert steps["nvlink_xid"]["status"] == "passed"


@pytest.mark.parametrize("trigger_", [MFU, SLO], ids=["mfu-regression", "inference-slo-breach"])
def test_pcie_replays_under_a_workload_are_gpu_hardware_at_the_gpu(
    settings: Settings, trigger_: dict[str, Any]
) -> None:
    node = "gpu-node-09" if trigger_ is MFU else "gpu-node-25"
    fault = {"kind": "pcie_downgrade", "node": node, "gpu": 2, "start": "-40m"}
    steps = run(settings, fleet([fault], trigger_))
    verdict = steps["where"]
    assert verdict["layer"] == "gpu_hardware"
    assert culprit_gpus(verdict) == {(node, "2")}
    assert steps["pcie_replays"]["status"] == "fired"


def test_a_link_trained_below_its_peers_fires_with_the_width_fields(settings: Settings) -> None:
    fault = {"kind": "pcie_downgrade", "node": "gpu-node-11", "gpu": 7, "start": "-40m"}
    steps = run(settings, fleet([fault | {"intensity": 0.6}], MFU, counters="all"))
    assert steps["pcie_downtrained"]["status"] == "fired"
    assert steps["pcie_downtrained"]["finding"]["culprit"] == {"node": "gpu-node-11", "gpu": "7"}
    assert "x8" in steps["pcie_downtrained"]["finding"]["summary"]


@pytest.mark.parametrize("trigger_", [NCCL, MFU, SLO])
def test_healthy_workloads_stay_healthy_with_the_new_checks(
    settings: Settings, trigger_: dict[str, Any]
) -> None:
    steps = run(settings, fleet([], trigger_, counters="all"))
    assert steps["where"]["layer"] == "none"
    for check in ("nvlink_xid", "nvlink_errors", "pcie_replays", "pcie_downtrained"):
        if check in steps:
            assert steps[check]["status"] == "passed", check

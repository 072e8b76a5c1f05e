"""A storm's verdict names each node's own GPU or HCA, not only the nodes (issue 14, part 7).

Aspects: `culprit: {gpus: ...}` / `{hcas: ...}` tokens become one culprit per node and device;
a finding with members keeps them through its JSON round trip and localization lists each
member (the node-only culprits are subsumed); evidence rows show each member's own series with
the median of the non-members beside it, and the finding is an outlier when a member is;
scoring credits the storm at device granularity and a wrong GPU on one node is a miss; a real
DBE storm on different GPUs of three nodes in a 32-node fleet, and IB symbol errors on
different HCAs of three nodes, through intake, the node-storm runbook and the engine.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.config import Settings
from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import localize
from bot.engine.running import RunOutcome
from bot.engine.steps.check import _devices
from bot.engine.steps.citing import cite
from bot.engine.steps.gather import summarize_signal
from bot.evaluation.evaluating import isolated, trigger
from bot.evaluation.scoring import ScenarioResult, score
from bot.wiring.runtime import open_runtime
from simulator.scenarios import Expect, parse_scenario
from integrations.telemetry import Sample, SignalResult

#: Which GPU / HCA fails on which node: a different device on each, so one device per finding
#: cannot be right.
BAD_GPUS = {"gpu-node-03": "2", "gpu-node-17": "6", "gpu-node-29": "1"}
BAD_HCAS = {"gpu-node-05": "mlx5_1", "gpu-node-14": "mlx5_6", "gpu-node-26": "mlx5_3"}


def dbe_step() -> dict[str, Any]:
    samples = [
        Sample(f"gpu-node-{n:02d}", 3.0 if BAD_GPUS.get(f"gpu-node-{n:02d}") == str(g) else 0.0,
               {"gpu": str(g)})
        for n in range(32)
        for g in range(8)
    ]
    result = SignalResult(signal="gpu.ecc.dbe_rate", samples=tuple(samples))
    summary = summarize_signal(result, nodes=[], window=timedelta(minutes=15))
    return {"kind": "signal", **summary}


def members() -> tuple[Culprit, ...]:
    return tuple(Culprit(node=n, gpu=g) for n, g in BAD_GPUS.items())


def test_device_tokens_become_one_culprit_per_node_and_device() -> None:
    gpus = _devices("gpu-node-03:2 gpu-node-17:6, gpu-node-03:2 gpu-node-29:1 ", kind="gpu")
    assert gpus == members()
    hcas = _devices("gpu-node-05:mlx5_1:1 gpu-node-14:mlx5_6:1", kind="hca")
    assert hcas == (
        Culprit(node="gpu-node-05", hca="mlx5_1:1"),
        Culprit(node="gpu-node-14", hca="mlx5_6:1"),
    )
    assert _devices("", kind="gpu") == () and _devices("gpu-node-03:", kind="gpu") == ()


def test_localization_names_every_member_device_and_survives_the_json_round_trip() -> None:
    finding = Finding(
        check_id="dbe_errors",
        layer=Layer.GPU_HARDWARE,
        severity=Severity.CRITICAL,
        summary="DBE on 3 nodes",
        culprit=members()[0],
        affected=tuple(BAD_GPUS),
        members=members(),
    )
    assert Finding.from_dict(finding.to_dict()) == finding
    outcome = CheckOutcome("dbe_errors", Layer.GPU_HARDWARE, CheckStatus.FIRED, finding)
    verdict = localize([outcome])
    assert verdict.culprit_details == members()  # no node-only duplicate of any member
    assert verdict.culprits == tuple(BAD_GPUS)
    assert "gpu-node-17 / GPU 6" in verdict.summary


def test_evidence_rows_show_each_members_own_series_next_to_the_non_members() -> None:
    cited = cite({"dbe": dbe_step()}, ["dbe"], culprit=members()[0], members=members(),
                 unit_of=lambda _: "errors/min")
    assert [(r.labels["node"], r.labels["gpu"], r.value) for r in cited.rows] == [
        ("gpu-node-03", "2", 3.0),
        ("gpu-node-17", "6", 3.0),
        ("gpu-node-29", "1", 3.0),
    ]
    peers = 32 * 8 - 3
    assert {(r.peer_median, r.peers, r.unit) for r in cited.rows} == {(0.0, peers, "errors/min")}
    assert cited.outlier is True


def test_scoring_credits_the_devices_and_a_wrong_gpu_on_one_node_is_a_miss() -> None:
    expect = Expect(
        runbook="node-storm",
        layer="gpu_hardware",
        culprits=list(BAD_GPUS),
        gpus=[f"{n}:{g}" for n, g in BAD_GPUS.items()],
        actions=[],
    )

    def scored(details: list[dict[str, str]]) -> ScenarioResult:
        verdict = {"kind": "localize", "layer": "gpu_hardware", "culprits": list(BAD_GPUS)}
        verdict["culprit_details"] = details
        outcome = RunOutcome("run-1", "INC-1", "node-storm", "completed", {"where": verdict})
        return score(
            "storm",
            expect,
            runbook="node-storm",
            outcome=outcome,
            error=None,
            queries=0,
            diagnosis_ms=None,
            destructive=frozenset(),
        )

    right = [m.to_dict() for m in members()]
    assert scored(right).culprit_correct and scored(right).device_correct
    wrong = [*right[:2], {"node": "gpu-node-29", "gpu": "7"}]
    assert not scored(wrong).device_correct and not scored(wrong).culprit_correct
    nodes_only = [{"node": n} for n in BAD_GPUS]
    assert not scored(nodes_only).culprit_correct


def storm(settings: Settings, *, faults: list[dict[str, Any]], alert: dict[str, Any]) -> Any:
    scenario = parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": "storm-devices-test", "description": "per-node devices"},
            "fleet": {"nodes": 32, "dcgm_counters": "all"},
            "faults": faults,
            "trigger": {"storm": alert},
        }
    )
    intake = settings.intake.model_copy(update={"storm_threshold": 3})  # three alerts: a storm
    storming = isolated(settings.model_copy(update={"intake": intake}))
    with open_runtime(storming, scenario=scenario, fresh=True) as rt:
        triggered = trigger(rt, scenario)
    assert triggered.outcome is not None, triggered.error
    return triggered.outcome


def test_a_dbe_storm_on_different_gpus_names_each_nodes_gpu(settings: Settings) -> None:
    faults = [
        {"kind": "ecc_dbe_storm", "node": n, "gpu": int(g), "start": "-9m"}
        for n, g in BAD_GPUS.items()
    ]
    outcome = storm(
        settings, faults=faults, alert={"alertname": "GPUEccStorm", "nodes": ",".join(BAD_GPUS)}
    )
    verdict = outcome.verdict
    assert verdict["layer"] == "gpu_hardware"
    assert {(c["node"], c.get("gpu")) for c in verdict["culprit_details"]} == set(BAD_GPUS.items())
    dbe = next(f for f in verdict["findings"] if f["check_id"] == "dbe_errors")
    assert {(e["labels"]["node"], e["labels"]["gpu"]) for e in dbe["evidence"]} == set(
        BAD_GPUS.items()
    )
    assert all(e["value"] > 0 for e in dbe["evidence"])


def test_ib_errors_on_different_hcas_name_each_nodes_hca(settings: Settings) -> None:
    faults = [
        {"kind": "ib_symbol_errors", "node": n, "hca": int(h[5:]), "start": "-12m"}
        for n, h in BAD_HCAS.items()
    ]
    alert = {"alertname": "IBLinkDegraded", "target_label": "instance", "nodes": ",".join(BAD_HCAS)}
    verdict = storm(settings, faults=faults, alert=alert).verdict
    assert verdict["layer"] == "fabric"
    named = {(c["node"], c.get("hca", "").split(":")[0]) for c in verdict["culprit_details"]}
    assert named == set(BAD_HCAS.items())
    errors = next(f for f in verdict["findings"] if f["check_id"] == "ib_errors")
    assert {(e["labels"]["node"], e["labels"]["device"]) for e in errors["evidence"]} == set(
        BAD_HCAS.items()
    )

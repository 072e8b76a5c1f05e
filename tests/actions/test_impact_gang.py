"""Gang-aware impact before a cordon or drain, read from the simulated cluster and telemetry.

Covers: on ecc-dbe-storm (llm-pretrain spans gpu-node-[00-07], 8 GPUs per rank) the impact of
losing gpu-node-03 names the job, 1 of 8 ranks and 8 of 64 GPUs, the checkpoint age the job
metrics export and the GPU-hours at risk; spares of the same pool are found (Ready,
schedulable, free GPUs) and a fresh checkpoint with spares recommends "drain now"; an old
checkpoint recommends "cordon and let it checkpoint"; a fleet the job fills has no spare and
recommends cordoning, with the reason; a node without jobs loses nothing; the impact reaches
the approval payload of a run, the CLI's approval text and the Slack blocks; each job's
telemetry is read once per run however many of its nodes are proposed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.actions.impact import (
    CORDON_AND_WAIT,
    DRAIN_NOW,
    Impact,
    JobReadings,
    approval_notes,
    read_impact,
    render_impact,
)
from bot.clock import FakeClock
from bot.config import Settings
from bot.slack.blocks import triage_blocks
from bot.slack.snapshots import read_triage
from bot.wiring.runtime import Runtime, open_runtime
from storage.db import session_scope

POOL = "NVIDIA-H100-80GB-HBM3"

FULL_FLEET = """\
apiVersion: gpu-oncall/v1
kind: Scenario
metadata: {name: full-fleet, description: One gang job fills every node of the pool.}
fleet:
  nodes: 4
  gpus_per_node: 8
  workloads:
    - {kind: training, name: llm-pretrain, nodes: "gpu-node-[00-03]"}
faults:
  - {kind: ecc_dbe_storm, node: gpu-node-02, gpu: 1, start: -10m}
trigger:
  alert: {alertname: GPUEccStorm, labels: {Hostname: gpu-node-02}}
"""


@pytest.fixture
def storm(settings: Settings, scenario_dir: Path) -> Iterator[Runtime]:
    path = scenario_dir / "ecc-dbe-storm.yaml"
    with open_runtime(settings, scenario_path=path, fresh=True) as rt:
        yield rt


def impact_of(rt: Runtime, node: str) -> Impact:
    return read_impact(
        cluster=rt.deps.cluster,
        readings=JobReadings(rt.deps.telemetry, rt.deps.signals.names()),
        node=node,
        pool_label=rt.deps.pool_label,
    )


def since_t0(rt: Runtime) -> float:
    """Seconds of the runtime's (simulated) clock since the fleet's start."""
    assert rt.fleet is not None
    return (rt.clock.now() - rt.fleet.t0).total_seconds()


def test_the_gang_job_on_the_node_loses_one_rank_of_eight(storm: Runtime) -> None:
    before = since_t0(storm)
    impact = impact_of(storm, "gpu-node-03")
    after = since_t0(storm)
    assert impact.pool == POOL
    [job] = impact.jobs
    assert (job.job, job.ranks_lost, job.ranks_total) == ("llm-pretrain", 1, 8)
    assert (job.gpus_lost, job.gpus_total) == (8, 64)
    # The sim's job saved 13 min (780 s) before t0; the age grows with the simulated clock,
    # which also counts the time the machine took, so it is bounded by the clock's readings.
    assert job.checkpoint_age_s is not None
    assert 780.0 + before <= job.checkpoint_age_s <= 780.0 + after
    assert job.gpu_hours_at_risk == pytest.approx(64 * job.checkpoint_age_s / 3600, abs=0.05)
    assert impact.gpus_needed == 8


def test_an_old_checkpoint_with_spares_says_cordon_and_let_it_checkpoint(
    storm: Runtime,
) -> None:
    impact = impact_of(storm, "gpu-node-03")
    assert impact.spares  # nodes 08-11 and 14-15 run nothing
    assert all(free == 8 for _, free in impact.spares)
    assert impact.recommendation == CORDON_AND_WAIT
    assert impact.reason.startswith("last checkpoint 13 min ago")


def test_a_fresh_checkpoint_with_spares_says_drain_now(storm: Runtime) -> None:
    assert isinstance(storm.clock, FakeClock)
    storm.clock.advance(timedelta(minutes=8))  # the job saved at 20 min; 1 min ago now
    before = since_t0(storm)
    impact = impact_of(storm, "gpu-node-03")
    after = since_t0(storm)
    age = impact.jobs[0].checkpoint_age_s
    assert age is not None and 780.0 + before - 1200.0 <= age <= 780.0 + after - 1200.0
    assert impact.recommendation == DRAIN_NOW
    assert "restarts on a spare" in impact.reason


def test_without_spares_the_job_has_nowhere_to_restart(
    settings: Settings, tmp_path: Path
) -> None:
    scenario = tmp_path / "full.yaml"
    scenario.write_text(FULL_FLEET)
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        impact = impact_of(rt, "gpu-node-02")
    assert impact.spares == ()
    assert [(j.job, j.ranks_lost, j.ranks_total) for j in impact.jobs] == [("llm-pretrain", 1, 4)]
    assert impact.recommendation == CORDON_AND_WAIT
    assert impact.reason.startswith(f"no spare capacity in pool {POOL} (0 free GPUs")
    lines = render_impact(impact.to_dict())
    assert lines[1] == f"Spares in pool {POOL}: none with free GPUs"


def test_a_node_without_jobs_loses_nothing(storm: Runtime) -> None:
    impact = impact_of(storm, "gpu-node-09")
    assert impact.jobs == ()
    assert impact.gpu_hours_at_risk is None
    assert impact.recommendation == DRAIN_NOW
    assert render_impact(impact.to_dict())[0] == "Impact: no running job has ranks on gpu-node-09"


def test_the_approval_payload_carries_the_impact(storm: Runtime) -> None:
    loaded = storm.catalog.get("ecc-storm")
    incident_id, _ = storm.engine.open_incident(loaded, {"node": "gpu-node-03"}, actor="cli:dave")
    outcome = storm.engine.start(
        loaded, inputs={"node": "gpu-node-03"}, incident_id=incident_id, requester="cli:dave"
    )
    assert outcome.approval is not None
    cordons = [p for p in outcome.approval["proposals"] if p["action"] in ("cordon", "drain")]
    assert cordons and all(p["impact"]["node"] == "gpu-node-03" for p in cordons)
    notes = approval_notes(outcome.approval)
    assert notes[0].startswith(
        "Impact: llm-pretrain loses 1 of 8 ranks (8 of 64 GPUs); last checkpoint 13 min ago; "
    )
    assert notes[0].endswith(" GPU-hours at risk")
    assert notes[2].startswith("Recommendation: cordon and let it checkpoint (last checkpoint")
    assert len([n for n in notes if n.startswith("Impact:")]) == 1  # once per node
    assert outcome.steps["fix"]["queries"] == 1  # the job's checkpoint age, read once
    with session_scope(storm.db) as session:
        view = read_triage(
            session,
            incident_id=incident_id,
            run_id=None,
            catalog=storm.catalog,
            policy=storm.deps.policy,
        )
    slack = json.dumps(triage_blocks(view), ensure_ascii=False)
    assert notes[0] in slack and "Recommendation: cordon and let it checkpoint" in slack


def test_each_job_is_read_once_however_many_of_its_nodes_are_proposed(storm: Runtime) -> None:
    readings = JobReadings(storm.deps.telemetry, storm.deps.signals.names())
    for node in ("gpu-node-01", "gpu-node-03", "gpu-node-05"):
        read_impact(
            cluster=storm.deps.cluster,
            readings=readings,
            node=node,
            pool_label=storm.deps.pool_label,
        )
    assert readings.queries == 1

"""GPU-hours lost per incident: the formulas (bot/incidents/gpu_hours.py), the records they are
read from (bot/incidents/costing.py), and the whole chain on the demo through the CLI.

Covers: out of service = node GPUs × (back or end − removed), one removal per node, ended by an
uncordon; idle jobs = job GPUs × (end − start) from fired_at, else detected_at; an open incident
counts to now and says so; a node whose GPU count was not recorded makes the term and the total
unknown (never 0); the worked lines show the numbers; jobs come from the approval's impact, each
once with its largest count; the demo's drained node and its training job give a positive total
that `incident --json`, the stored `gpu_hours_lost` and `/metrics`' lost-GPU-seconds agree on.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.incidents.costing import jobs_of, removals_of
from bot.incidents.gpu_hours import IdleJob, Removal, compute_gpu_hours, render_gpu_hours
from bot.incidents.reporting import read_mttr_groups
from storage.db import session_scope
from storage.tables import ActionRow, TimelineEvent
from tests.cli.cli_process import cli_output, metrics_exposition
from tests.incidents.incident_helpers import open_ecc_storm

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_both_terms_follow_their_formulas() -> None:
    figure = compute_gpu_hours(
        fired_at=T0,
        detected_at=T0 + timedelta(minutes=2),
        resolved_at=T0 + timedelta(hours=2),
        now=T0 + timedelta(days=1),
        removals=[Removal("gpu-node-03", 8, T0 + timedelta(minutes=30))],
        jobs=[IdleJob("llm-pretrain", 64), IdleJob("eval", 2)],
    )
    assert figure.out_of_service.hours == 12.0  # 8 GPUs × 1h 30m
    assert figure.idle_jobs.hours == 132.0  # (64 + 2) GPUs × 2h
    assert (figure.total, figure.ongoing) == (144.0, False)
    assert figure.out_of_service.worked == (
        "gpu-node-03: 8 GPUs × 1h 30m (12:30:00 → end 14:00:00) = 12.00",
    )
    assert figure.idle_jobs.worked[0] == "llm-pretrain: 64 GPUs × 2h = 128.00"
    lines = render_gpu_hours(figure)
    assert lines[0] == "GPU-hours lost: 144.00"
    assert "node GPUs × (back_at − removed_at)" in lines[1]


def test_an_open_incident_counts_to_now_from_detection_when_nobody_dated_it() -> None:
    figure = compute_gpu_hours(
        fired_at=None,
        detected_at=T0,
        resolved_at=None,
        now=T0 + timedelta(minutes=15),
        removals=[Removal("n1", 4, T0, back_at=T0 + timedelta(minutes=6))],
        jobs=[IdleJob("j", 8)],
    )
    assert figure.out_of_service.hours == 0.4  # back after 6 minutes
    assert figure.idle_jobs.hours == 2.0
    assert figure.ongoing and render_gpu_hours(figure)[0].endswith("so far (open)")


def test_an_unrecorded_gpu_count_is_unknown_not_zero() -> None:
    figure = compute_gpu_hours(
        fired_at=T0,
        detected_at=T0,
        resolved_at=T0 + timedelta(hours=1),
        now=T0,
        removals=[Removal("n1", None, T0), Removal("n2", 8, T0)],
        jobs=[],
    )
    assert (figure.out_of_service.hours, figure.total) == (None, None)
    assert figure.out_of_service.worked[0] == "n1: GPU count not recorded × 1h"
    assert figure.to_dict()["total"] is None


def _action(action: str, target: str, at: datetime, *, gpus: int | None = 8) -> ActionRow:
    data: dict[str, Any] = {} if gpus is None else {"gpus": gpus}
    return ActionRow(
        run_id="r", step_id="act", action=action, target=target, idempotency_key=f"{action}{at}",
        status="succeeded", result={"outcome": "changed", "data": data}, started_at=at,
        finished_at=at,
    )  # fmt: skip


def test_removals_are_read_from_succeeded_cordons_and_drains() -> None:
    rows = [
        _action("cordon", "n1", T0),
        _action("drain", "n1", T0 + timedelta(minutes=1)),  # same node: still one removal
        _action("open_ticket", "n1", T0 + timedelta(minutes=2)),
        _action("drain", "n2", T0 + timedelta(minutes=3), gpus=None),
        _action("uncordon", "n1", T0 + timedelta(minutes=40)),
    ]
    failed = _action("cordon", "n3", T0)
    failed.status = "failed"
    assert removals_of([*rows, failed]) == [
        Removal("n1", 8, T0, back_at=T0 + timedelta(minutes=40)),
        Removal("n2", None, T0 + timedelta(minutes=3)),
    ]


def test_jobs_come_from_the_approvals_impact_once_each() -> None:
    def request(jobs: list[dict[str, Any]]) -> TimelineEvent:
        proposal = {"action": "drain", "impact": {"node": "n1", "jobs": jobs}}
        return TimelineEvent(
            incident_id=1, at=T0, kind="approval_requested", actor="bot", summary="s",
            payload={"proposals": [proposal, {"action": "open_ticket"}]},
        )  # fmt: skip

    found = jobs_of(
        [
            request([{"job": "llm", "gpus_total": 64}, {"job": "eval", "gpus_total": 2}]),
            request([{"job": "llm", "gpus_total": 72}, {"job": "broken"}]),
        ]
    )
    assert found == [IdleJob("eval", 2), IdleJob("llm", 72)]


def cli(tmp_path: Path, *args: str) -> str:
    return cli_output(tmp_path, *args, timeout=300)


def test_the_demo_drain_and_its_job_cost_gpu_hours_everywhere_alike(tmp_path: Path) -> None:
    cli(tmp_path, "demo", "--yes")  # the ECC storm on gpu-node-03: cordon, drain, ticket
    data = json.loads(cli(tmp_path, "incident", "INC-1", "--json"))
    cost = data["gpu_hours"]
    (drained,) = cost["out_of_service"]["worked"]
    assert drained.startswith("gpu-node-03: 8 GPUs × ")
    assert cost["idle_jobs"]["worked"], "the training job on the node is idle while it lasts"
    assert cost["total"] > 0 and not cost["ongoing"]
    assert data["incident"]["gpu_hours_lost"] == cost["total"]

    lines = metrics_exposition(tmp_path).splitlines()
    (line,) = [x for x in lines if x.startswith("gpu_oncall_lost_gpu_seconds_sum")]
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(cost["total"] * 3600)


def test_mttr_groups_count_a_resolution_stamped_ahead_and_use_the_stored_gpu_hours(
    engine: Engine, clock: FakeClock
) -> None:
    """A replica whose clock runs ahead (or the simulator's) resolved the incident "after" the
    reader's now: it still counts, with the GPU-hours figure stored at its resolution."""
    with session_scope(engine) as session:
        incident = open_ecc_storm(session, clock, fired=clock.now() - timedelta(minutes=10))
        incident.state, incident.resolved_at = "resolved", clock.now() + timedelta(minutes=5)
        incident.gpu_hours_lost = 12.5
        session.add(incident)
    with session_scope(engine) as session:
        (group,) = read_mttr_groups(
            session, since=clock.now() - timedelta(days=1), until=clock.now(), by="runbook"
        )
    assert (group.key, group.incidents, group.gpu_hours) == ("ecc-storm", 1, 12.5)

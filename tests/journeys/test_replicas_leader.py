"""One leader for the periodic jobs across `gpu-oncall serve` replicas.

Covers, in process: a tick of either job does nothing while the leadership says another process
leads, runs as soon as it says this one does, and reports the answer (the gauge) at every tick.
With real processes on 127.0.0.1: two replicas on one PostgreSQL database, exactly one reports
`gpu_oncall_leader 1` on /metrics; after SIGKILL of the leader the survivor's gauge flips to 1
and it runs the periodic jobs (an approval requested after the kill passes its expiry and the
survivor expires it: it is the only process left). On one SQLite file the second replica never
leads while the first lives (its gauge stays 0, the lock file names the first), and leads once
the first is killed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from sqlmodel import select

from bot.engine.running import RunEngine
from bot.work.scheduler import Jobs
from storage.db import make_engine, session_scope
from storage.tables import ApprovalRow
from tests.servers.oncall import alert, webhook
from tests.servers.prometheus import poll
from tests.servers.replicas import ServeReplica, start_serve, stop_all

FAST_JOBS = {
    "GPU_ONCALL_SERVER__EXPIRY_CHECK_SECONDS": "0.2",
    "GPU_ONCALL_WORK__TAKEOVER_SECONDS": "0.2",
    "GPU_ONCALL_WORK__LEASE_SECONDS": "2",
    "GPU_ONCALL_WORK__HEARTBEAT_SECONDS": "0.3",
    "GPU_ONCALL_POLICY__APPROVAL_TTL_MINUTES": "0.05",  # 3 s
}
GAUGE = re.compile(r"^gpu_oncall_leader (\d+)(?:\.0)?$", re.MULTILINE)


# -- in process -----------------------------------------------------------------------------


@dataclass
class SwitchLeadership:
    leading: bool = False
    checks: int = 0

    def check(self) -> bool:
        self.checks += 1
        return self.leading

    def release(self) -> None:
        self.leading = False


@dataclass
class CountingEngine:
    expiries: int = 0

    def expire_due(self) -> list[Any]:
        self.expiries += 1
        return []


@dataclass
class Recorder:
    takeovers: int = 0
    gauge: list[bool] = field(default_factory=list)

    def take_over(self) -> int:
        self.takeovers += 1
        return 0


def test_ticks_run_only_while_this_process_leads_and_report_it() -> None:
    leadership, engine, seen = SwitchLeadership(), CountingEngine(), Recorder()
    jobs = Jobs(
        cast(RunEngine, engine),
        interval_seconds=30,
        take_over=seen.take_over,
        leadership=leadership,
        on_leadership=seen.gauge.append,
    )
    assert (jobs.expire_approvals(), jobs.take_over()) == (0, 0)
    assert (engine.expiries, seen.takeovers) == (0, 0)
    leadership.leading = True
    jobs.expire_approvals()
    jobs.take_over()
    assert (engine.expiries, seen.takeovers) == (1, 1)
    leadership.leading = False  # lost the lock (database restart): stand by again
    jobs.expire_approvals()
    assert engine.expiries == 1
    assert seen.gauge == [False, False, True, True, False]
    assert leadership.checks == 5


# -- real processes -------------------------------------------------------------------------


@pytest.fixture
def replicas() -> Iterator[Callable[..., ServeReplica]]:
    yield start_serve
    stop_all()


def leader_gauge(replica: ServeReplica) -> int | None:
    try:
        text = httpx.get(f"{replica.url}/metrics", timeout=10.0).text
    except httpx.HTTPError:
        return None
    found = GAUGE.search(text)
    return int(found.group(1)) if found else None


def post_ecc_alert(replica: ServeReplica) -> None:
    starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    body = webhook([alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)])
    answer = httpx.post(f"{replica.url}/alerts", json=body, timeout=30.0)
    assert answer.status_code == 200, answer.text


def approval_states(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with session_scope(engine) as session:
            return [row.state for row in session.exec(select(ApprovalRow))]
    finally:
        engine.dispose()


def test_postgres_one_replica_leads_and_the_survivor_takes_the_jobs_over(
    postgres_url: str, replicas: Callable[..., ServeReplica], tmp_path: Path
) -> None:
    first = replicas(postgres_url, env=FAST_JOBS, workdir=tmp_path / "a")
    second = replicas(postgres_url, env=FAST_JOBS, workdir=tmp_path / "b")
    pair = (first, second)
    poll(lambda: sorted(leader_gauge(r) or 0 for r in pair) == [0, 1], what="one leader of two")
    leader = next(r for r in pair if leader_gauge(r) == 1)
    survivor = second if leader is first else first
    assert leader_gauge(survivor) == 0

    leader.kill()
    poll(lambda: leader_gauge(survivor) == 1, what="the survivor to lead")
    post_ecc_alert(survivor)
    poll(lambda: approval_states(postgres_url) == ["pending"], what="the run to await approval")
    poll(lambda: approval_states(postgres_url) == ["expired"], what="the survivor to expire it")
    assert survivor.alive()


def test_sqlite_a_second_replica_never_leads_while_the_first_lives(
    tmp_path: Path, replicas: Callable[..., ServeReplica]
) -> None:
    url = f"sqlite:///{tmp_path / 'oncall.db'}"
    lock_file = tmp_path / "oncall.leader"
    first = replicas(url, env=FAST_JOBS, workdir=tmp_path / "a")
    poll(lambda: leader_gauge(first) == 1, what="the first replica to lead")
    second = replicas(url, env=FAST_JOBS, workdir=tmp_path / "b")
    post_ecc_alert(second)
    poll(lambda: approval_states(url) == ["expired"], what="the leader to expire the approval")
    assert leader_gauge(second) == 0
    assert lock_file.read_text().split() == [str(first.pid)]

    first.kill()
    poll(lambda: leader_gauge(second) == 1, what="the second replica to lead")
    assert lock_file.read_text().split() == [str(second.pid)]

"""Leader election for periodic jobs: one leader at a time, takeover when the leader dies.

Aspects: SQLite file lock (one process leads; a SIGKILLed leader's lock is released by the
kernel), PostgreSQL advisory lock (one leader among replicas; SIGKILL of the leader hands the
lock to the next; a database restart makes the leader step down, then lead again).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from storage.leader import AdvisoryLockLeadership, make_leadership
from tests.servers.postgres import PostgresServer
from tests.servers.prometheus import poll

ROOT = Path(__file__).resolve().parents[2]


def _leader_process(url: str) -> subprocess.Popen[str]:
    """A real process that takes leadership, says so on stdout, then waits to be killed."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from storage.leader import make_leadership
        leadership = make_leadership({url!r})
        print("leader" if leadership.check() else "follower", flush=True)
        time.sleep(600)
        """
    )
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "leader"
    return process


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


def test_sqlite_one_process_leads_until_it_is_killed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'oncall.db'}"
    leader = _leader_process(url)
    here = make_leadership(url)
    try:
        assert here.check() is False
        _kill(leader)
        assert here.check() is True
        assert here.check() is True  # stays the leader
    finally:
        here.release()
        if leader.poll() is None:
            _kill(leader)


def test_in_memory_sqlite_always_leads() -> None:
    assert make_leadership("sqlite://").check() is True


def test_postgres_one_replica_leads_and_the_next_takes_over_after_sigkill(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url()
    leader = _leader_process(url)
    first, second = make_leadership(url), make_leadership(url)
    try:
        assert first.check() is False and second.check() is False
        _kill(leader)
        poll(lambda: first.check() or second.check(), what="a replica to take over leadership")
        assert [first.check(), second.check()].count(True) == 1
    finally:
        first.release()
        second.release()
        if leader.poll() is None:
            _kill(leader)


def test_postgres_leader_steps_down_while_the_database_is_down(
    postgres_server: PostgresServer,
) -> None:
    leadership = AdvisoryLockLeadership(postgres_server.url(), timeout_seconds=2)
    try:
        assert leadership.check() is True
        postgres_server.stop()
        assert leadership.check() is False
        postgres_server.start()
        poll(leadership.check, what="leadership after the database came back")
    finally:
        leadership.release()

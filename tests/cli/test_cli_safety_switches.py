"""`gpu-oncall pause|resume|breaker status|reset` as real subprocesses on one SQLite file.

Covers: a breaker tripped by one process is open for the next (it is persisted: a restart does
not close it) and `breaker status --json` says so with the trip; a non-approver's `breaker
reset` and `resume` exit 2 with one line naming the approvers and change nothing; an
approver's reset closes it; `pause REASON` records who and why and lists the open incidents
it was noted on; an unknown breaker verb is a usage error (exit 2).
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from bot.clock import SystemClock
from storage import incidents as incident_store
from storage import safety as safety_store
from storage.db import create_schema, make_engine, session_scope
from tests.cli.cli_process import run_cli


def gpu_oncall(tmp_path: Path, *args: str, user: str) -> subprocess.CompletedProcess[str]:
    env = {"GPU_ONCALL_POLICY__APPROVERS": '["cli:bob"]', "GPU_ONCALL_IDENTITY__CLI_USER": user}
    return run_cli(tmp_path, *args, env=env)


def prepare(tmp_path: Path) -> None:
    """A database with one open incident and a tripped breaker (another process's doing)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    now = SystemClock().now()
    with session_scope(engine) as session:
        incident_store.create_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-03",
            target_kind="node",
            severity="critical",
            title="ECC error storm on gpu-node-03",
            at=now,
            fired_at=now,
            detected_at=now,
        )
        safety_store.trip_breaker(session, at=now, detail="10 nodes cordoned or drained in 1h")
    engine.dispose()


def test_the_breaker_stays_open_across_processes_until_an_approver_resets_it(
    tmp_path: Path,
) -> None:
    prepare(tmp_path)
    shown = gpu_oncall(tmp_path, "breaker", "status", "--json", user="alice")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["state"] == "open"
    assert status["trip_detail"] == "10 nodes cordoned or drained in 1h"
    assert datetime.fromisoformat(status["tripped_at"]) <= datetime.now(UTC)

    refused = gpu_oncall(tmp_path, "breaker", "reset", "--reason", "looks fine", user="alice")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "gpu-oncall: refused: cli:alice is not an approver, and only approvers may reset the "
        "circuit breaker (approvers: cli:bob)"
    ]
    assert json.loads(gpu_oncall(tmp_path, "breaker", "status", "--json", user="alice").stdout)[
        "state"
    ] == "open"

    reset = gpu_oncall(tmp_path, "breaker", "reset", "--reason", "racks checked", user="bob")
    assert reset.returncode == 0, reset.stderr
    assert "Circuit breaker reset by cli:bob: racks checked" in reset.stdout
    assert "circuit breaker closed (0 of 10 node removals in the last 1h)" in reset.stdout


def test_pause_records_who_and_why_and_only_an_approver_resumes(tmp_path: Path) -> None:
    prepare(tmp_path)
    paused = gpu_oncall(tmp_path, "pause", "firmware", "rollout", user="alice")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.splitlines()[0] == "Paused by cli:alice: firmware rollout"
    assert "Noted on the timeline of INC-1" in paused.stdout
    assert "paused by cli:alice" in gpu_oncall(tmp_path, "breaker", "status", user="bob").stdout

    refused = gpu_oncall(tmp_path, "resume", user="alice")
    assert refused.returncode == 2
    assert "only approvers may resume the bot's actions (approvers: cli:bob)" in refused.stderr
    resumed = gpu_oncall(tmp_path, "resume", user="bob")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == "Resumed by cli:bob; ended: firmware rollout"
    assert "not paused" in gpu_oncall(tmp_path, "breaker", "status", user="bob").stdout

    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    with session_scope(engine) as session:
        noted = [
            (e.actor, e.summary.split(" (")[0])
            for e in incident_store.list_events(session, 1)
            if e.kind == "note"
        ]
    engine.dispose()
    assert noted == [
        ("cli:alice", "Remediation paused by cli:alice: firmware rollout"),
        ("cli:bob", "Remediation resumed by cli:bob"),
    ]


def test_an_unknown_breaker_verb_is_a_usage_error(tmp_path: Path) -> None:
    done = gpu_oncall(tmp_path, "breaker", "open", user="alice")
    assert done.returncode == 2
    assert "invalid choice: 'open' (choose from 'status', 'reset')" in done.stderr

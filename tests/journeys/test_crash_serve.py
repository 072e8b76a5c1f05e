"""Crash safety with real processes: `gpu-oncall serve` and `gpu-oncall approve` killed with
SIGKILL at points of a triage and a remediation, then a new process takes the work over.

Each test runs the bot as subprocesses on one SQLite file (the simulated fleet's state file
beside it), with short leases (`GPU_ONCALL_WORK__*`), and compares the end state with what an
uninterrupted run leaves: the incident resolved, the verdict naming gpu-node-03, one run, the
three actions succeeded once each (their rows, the fleet's journal of cluster writes, and the
distinct idempotency keys a ticket webhook received). Points are hit with real stalls, never
timing guesses: a ticket webhook on 127.0.0.1 that holds its first request stands for a slow
ticket system, and the kill lands while `approve` waits on it.

Covers: serve killed right after answering a webhook (the triage work was committed with the
alert) and at the approval checkpoint; approve killed while its ticket request hangs (after
the decision, the cordon and the drain committed), finished by the next `serve` start or by a
second `approve` (refused, naming the dead worker's lease, until it expires).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers.oncall import alert, webhook
from sqlmodel import select

from storage.db import make_engine, session_scope
from storage.tables import ActionRow, Incident, RunbookRun, TimelineEvent

NODE = "gpu-node-03"
WAIT = 90.0  # upper bound for a state to be reached; tests finish as soon as it is


@dataclass
class TicketDesk:
    """A ticket webhook on 127.0.0.1 that records every request's idempotency key and, while
    `hold` is set, keeps requests waiting (the process under test hangs on it)."""

    keys: list[str] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    hold: bool = True
    release: threading.Event = field(default_factory=threading.Event)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        desk = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = str(json.loads(body or b"{}").get("idempotency_key", ""))
                desk.keys.append(key)
                desk.arrived.set()
                if desk.hold:
                    desk.release.wait(WAIT)
                answer = json.dumps({"id": f"TCK-{key[:6]}"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


@contextmanager
def ticket_desk() -> Iterator[tuple[TicketDesk, str]]:
    desk = TicketDesk()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), desk.handler())
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield desk, f"http://127.0.0.1:{httpd.server_address[1]}/tickets"
    finally:
        desk.release.set()
        httpd.shutdown()
        httpd.server_close()


@dataclass
class Bot:
    """The bot's processes on one database under tmp_path."""

    tmp_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    drains: list[threading.Thread] = field(default_factory=list)

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.tmp_path / 'oncall.db'}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "GPU_ONCALL_STORAGE__URL": self.db_url,
                "GPU_ONCALL_WORK__LEASE_SECONDS": "2",
                "GPU_ONCALL_WORK__HEARTBEAT_SECONDS": "0.3",
                "GPU_ONCALL_WORK__TAKEOVER_SECONDS": "0.5",
                "USER": "alice",
                "GPU_ONCALL_IDENTITY__ADMINS": '["cli:alice"]',  # `approve --as` acts for others
                "PYTHONUNBUFFERED": "1",
            }
        )
        for port in ("GPU_ONCALL_CLUSTER", "GPU_ONCALL_TELEMETRY"):  # serve needs them named
            env.setdefault(port, "sim")
        env.update(self.extra_env)
        return env

    def popen(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", *args],
            cwd=self.tmp_path,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def serve(self) -> str:
        """Start `gpu-oncall serve` on a free port; its URL once it listens."""
        proc = self.popen("serve", "--port", "0")
        assert proc.stdout is not None
        for line in proc.stdout:
            found = re.search(r"serving on (http://[0-9.]+:[0-9]+)", line)
            if found:  # keep reading, so a full pipe never blocks the server
                drain = threading.Thread(target=proc.stdout.read, daemon=True)
                drain.start()
                self.drains.append(drain)
                return found.group(1)
        raise AssertionError(f"serve exited with {proc.wait()} before listening")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli.main", *args],
            cwd=self.tmp_path,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=WAIT,
        )

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                kill(proc)
        for drain in self.drains:
            drain.join(WAIT)
        for proc in self.procs:
            if proc.stdout is not None:
                proc.stdout.close()


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: no handler, no finally block, no atexit runs."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=WAIT)


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Bot]:
    running = Bot(tmp_path)
    try:
        yield running
    finally:
        running.kill_all()


def post_alert(url: str, *, status: str = "firing") -> httpx.Response:
    starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    ends = datetime.now(UTC) if status == "resolved" else None
    body = webhook(
        [alert("GPUEccStorm", {"Hostname": NODE}, starts_at=starts, status=status, ends_at=ends)]
    )
    answer = httpx.post(f"{url}/alerts", json=body, timeout=30.0)
    assert answer.status_code == 200, answer.text
    return answer


def wait_until(bot: Bot, what: str, check: Callable[[Any], bool]) -> None:
    """Poll the database (read-only) until `check(session)` holds; fail after WAIT seconds."""
    engine = make_engine(bot.db_url)
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline:
            with session_scope(engine) as session:
                if check(session):
                    return
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise AssertionError(f"timed out waiting until {what}")


def incident_state(state: str) -> Callable[[Any], bool]:
    def check(session: Any) -> bool:
        rows = list(session.exec(select(Incident)))
        return bool(rows) and all(row.state == state for row in rows)

    return check


def end_state(bot: Bot) -> dict[str, Any]:
    """What an operator and the cluster see once everything settled."""
    engine = make_engine(bot.db_url)
    with session_scope(engine) as session:
        incidents = [
            (i.state, i.runbook, i.target, i.layer, tuple(i.culprits))
            for i in session.exec(select(Incident))
        ]
        runs = sorted(r.status for r in session.exec(select(RunbookRun)))
        actions = sorted((a.action, a.target, a.status) for a in session.exec(select(ActionRow)))
        notes = [e.summary for e in session.exec(select(TimelineEvent)) if e.kind == "note"]
    engine.dispose()
    state_file = bot.tmp_path / "oncall.sim-state.json"
    journal = json.loads(state_file.read_text())["fleet"]["journal"] if state_file.exists() else []
    writes = Counter(
        (entry["verb"], entry["node"])
        for entry in journal
        if entry.get("verb") in ("cordon", "drain")
    )
    return {
        "incidents": incidents,
        "runs": runs,
        "actions": actions,
        "writes": dict(writes),
        "taken_over": any("taken over" in n for n in notes),
    }


EXPECTED = {
    "incidents": [("resolved", "ecc-storm", NODE, "gpu_hardware", (NODE,))],
    "runs": ["completed"],
    "actions": [
        ("cordon", NODE, "succeeded"),
        ("drain", NODE, "succeeded"),
        ("open_ticket", NODE, "succeeded"),
    ],
    "writes": {("cordon", NODE): 1, ("drain", NODE): 1},
}
"""The end state of the uninterrupted journey (tests/cli/test_cli_journeys.py and the first
test below): resolved, one completed run, each action once, one cordon and one drain."""


def settled(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "taken_over"}


def test_uninterrupted_serve_then_approve_reaches_the_expected_end_state(bot: Bot) -> None:
    url = bot.serve()
    post_alert(url)
    wait_until(bot, "the run waits at its approval", incident_state("awaiting_approval"))
    approved = bot.run("approve", "INC-1", "--as", "cli:bob")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    post_alert(url, status="resolved")
    wait_until(bot, "the incident resolves", incident_state("resolved"))
    state = end_state(bot)
    assert settled(state) == EXPECTED
    assert not state["taken_over"]


def test_serve_killed_right_after_answering_a_webhook_still_triages_it(bot: Bot) -> None:
    url = bot.serve()
    post_alert(url)
    kill(bot.procs[-1])  # the answer came back: the alert and its triage work are committed
    url = bot.serve()
    wait_until(bot, "the run waits at its approval", incident_state("awaiting_approval"))
    approved = bot.run("approve", "INC-1", "--as", "cli:bob")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    post_alert(url, status="resolved")
    wait_until(bot, "the incident resolves", incident_state("resolved"))
    assert settled(end_state(bot)) == EXPECTED


def test_serve_killed_at_the_approval_checkpoint_loses_nothing(bot: Bot) -> None:
    url = bot.serve()
    post_alert(url)
    wait_until(bot, "the run waits at its approval", incident_state("awaiting_approval"))
    kill(bot.procs[-1])
    url = bot.serve()
    approved = bot.run("approve", "INC-1", "--as", "cli:bob")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    post_alert(url, status="resolved")
    wait_until(bot, "the incident resolves", incident_state("resolved"))
    assert settled(end_state(bot)) == EXPECTED


def _approve_killed_during_the_ticket(bot: Bot, desk: TicketDesk) -> None:
    """Triage on `serve`, stop it, then `approve` until its ticket request hangs; SIGKILL it."""
    url = bot.serve()
    post_alert(url)
    wait_until(bot, "the run waits at its approval", incident_state("awaiting_approval"))
    kill(bot.procs[-1])
    approving = bot.popen("approve", "INC-1", "--as", "cli:bob")
    assert desk.arrived.wait(WAIT), "approve never reached the ticket action"
    kill(approving)  # decided and cordoned (committed); the ticket hangs; the drain waits
    desk.hold = False  # for the job's next checkpoint (bot/engine/deferred.py)
    desk.release.set()
    state = end_state(bot)
    assert state["writes"] == {("cordon", NODE): 1}
    assert ("open_ticket", NODE, "running") in state["actions"]


def test_approve_killed_during_an_action_is_finished_by_the_next_serve(bot: Bot) -> None:
    with ticket_desk() as (desk, tickets):
        bot.extra_env["GPU_ONCALL_TICKETS__WEBHOOK_URL"] = tickets
        _approve_killed_during_the_ticket(bot, desk)
        url = bot.serve()
        wait_until(bot, "the remediation finishes", incident_state("monitoring"))
        post_alert(url, status="resolved")
        wait_until(bot, "the incident resolves", incident_state("resolved"))
        state = end_state(bot)
        assert settled(state) == EXPECTED
        assert state["taken_over"]
        assert len(set(desk.keys)) == 1  # one ticket, asked for again under the same key


def test_approve_killed_during_an_action_is_finished_by_a_second_approve(bot: Bot) -> None:
    with ticket_desk() as (desk, tickets):
        bot.extra_env["GPU_ONCALL_TICKETS__WEBHOOK_URL"] = tickets
        bot.extra_env["GPU_ONCALL_WORK__LEASE_SECONDS"] = "30"
        _approve_killed_during_the_ticket(bot, desk)
        refused = bot.run("approve", "INC-1", "--as", "cli:carol")
        assert refused.returncode != 0
        assert "already being resumed by worker" in refused.stdout + refused.stderr
        engine = make_engine(bot.db_url)  # 30 s pass: the dead worker's lease ends
        with session_scope(engine) as session:
            session.connection().exec_driver_sql(
                "UPDATE work_items SET lease_expires_at = '2000-01-01 00:00:00.000000'"
                " WHERE state = 'pending'"
            )
        engine.dispose()
        again = bot.run("approve", "INC-1", "--as", "cli:carol")
        assert again.returncode == 0, again.stdout + again.stderr
        state = end_state(bot)
        assert state["incidents"][0][0] == "resolved"  # approve settles the simulated alert
        assert settled(state) == EXPECTED
        assert state["taken_over"]
        assert len(set(desk.keys)) == 1

"""Crash safety of the node actions on a Kubernetes API: `gpu-oncall approve` killed with
SIGKILL in the middle of the cordon and of the drain, then the next start (`gpu-oncall serve`,
or a second `approve`) finishes the remediation, each cluster write applied once.

The stack is the ECC-storm journey's (tests/journeys/test_ecc_storm_on_kubernetes.py): the
bot's real processes with GPU_ONCALL_CLUSTER=kubernetes against the fake API server over
HTTP, telemetry from one Debian Prometheus per module (each test has its own fleet, exporter
and `fleet` label, so one test's drain never changes another's diagnosis), short leases.

The kill points are reached with the fake's request stall (`FakeKube.stall`), never timing: the
held request reaching the server is the proof `approve` is inside the action. After the kill
the stalled request is released, either applied (the write lands after its client died) or
answered with an error (it never lands). Points:
- the cordon's `spec.unschedulable` PATCH (after the ownership claim was written);
- the drain's first policy/v1 Eviction POST (after the cordon finished);
- the cordon's first read of the node: the decision and the resume work have committed, the
  cordon's ledger claim exists, nothing was written. Between the commit of the decision and
  this read `approve` sends one request, the safety check's list of all nodes (before the
  claim; it names no node), so this is the earliest point after the decision a request
  stall can reach without a hook in production code; the test checks the approval is decided
  and that nothing was written when the kill lands.

Each test then checks, from the fake's record, that the node got one cordon PATCH, each pod at
most one accepted Eviction (the set of evicted pods is the drain's), no DELETE, and from the
database that the incident ends as an uninterrupted run does (resolved by the real alert's
resolution; one completed run; cordon, drain and ticket succeeded once each) with the
takeover on the timeline; every action on the timeline once (also those the stopped worker
carried out), and the cordon's `cordoned-at` marker written even when its PATCH landed after
the worker died (so a person's later uncordon is recognised).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from journeys.test_crash_serve import WAIT, Bot, kill
from journeys.test_ecc_storm_on_kubernetes import (
    ALERT,
    MARKERS,
    NODE,
    RUNBOOK,
    SCENARIO,
    _sets,
    evictable,
    seconds_runbook,
    writes,
)
from servers.oncall import alert, webhook
from servers.prometheus import poll
from servers.world import World, runbook_signals, start_world
from sqlmodel import select

from integrations.signals import load_signal_catalog
from runbooks import SIGNALS_FILE
from simulator import Fleet, load_scenario
from storage.db import make_engine, session_scope
from storage.tables import ActionRow, ApprovalRow, Incident, RunbookRun, TimelineEvent
from tests.servers.fake_kube import FakeKube, Stall, start_fake_kube

CASES = ("cordon-applied", "cordon-refused", "evict-applied", "evict-refused", "before-writes")
"""One fleet (and Prometheus `fleet` label) per test."""
CORDONED_AT = "gpu-oncall.io/cordoned-at"
SETTLE = 2 * WAIT
"""Upper bound for the incident to reach a state; a test goes on as soon as it does."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    fleets = {
        case: Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
        for case in CASES
    }
    started = start_world(
        tmp_path_factory.mktemp("prom"),
        fleets,
        catalog=load_signal_catalog(SIGNALS_FILE),
        signals=runbook_signals(["ecc-storm"]),
    )
    try:
        yield started
    finally:
        started.close()


@dataclass
class Crash:
    """One test's bot processes, API server and fleet."""

    bot: Bot
    kube: FakeKube
    fleet: Fleet
    evictions: set[str]
    """The Eviction paths a drain of NODE must send, taken before anything ran."""
    starts: datetime

    def post(self, url: str, *, status: str = "firing") -> None:
        ends = datetime.now(UTC) if status == "resolved" else None
        sent = alert(ALERT, {"Hostname": NODE}, starts_at=self.starts, status=status, ends_at=ends)
        answer = httpx.post(f"{url}/alerts", json=webhook([sent]), timeout=30.0)
        assert answer.status_code == 200, answer.text


@contextmanager
def crash_stack(tmp_path: Path, world: World, case: str) -> Iterator[Crash]:
    fleet = world.fleets[case]
    books = seconds_runbook(tmp_path / "operator-runbooks")
    with start_fake_kube() as kube:
        kube.seed_from_fleet(fleet)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        bot = Bot(
            tmp_path,
            extra_env={
                "GPU_ONCALL_CLUSTER": "kubernetes",
                "GPU_ONCALL_TELEMETRY": "prometheus",
                "GPU_ONCALL_PROMETHEUS__URL": world.prometheus.url,
                "GPU_ONCALL_PROMETHEUS__MATCH": json.dumps({"fleet": case}),
                "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
                "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(kubeconfig),
                "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
                "GPU_ONCALL_RUNBOOK_DIRS": json.dumps([str(books)]),
                # kills land in the cordon and the drain, so the approved drain runs at once
                # (the wait for a checkpoint: tests/journeys/test_crash_drain_plan.py)
                "GPU_ONCALL_POLICY__DRAIN_CHECKPOINT_DEADLINE_MINUTES": "0",
            },
        )
        starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        try:
            yield Crash(bot, kube, fleet, evictable(kube, NODE), starts)
        finally:
            bot.kill_all()


# --- the steps of every test ------------------------------------------------------------------


def triage_to_approval(crash: Crash) -> None:
    """`serve` triages the alert to its approval; then it stops (SIGKILL, idle)."""
    url = crash.bot.serve()
    crash.post(url)
    reach(crash, "the run to wait at its approval", "awaiting_approval")
    kill(crash.bot.procs[-1])


def kill_approve_at(crash: Crash, held: Stall) -> None:
    """`approve` until its request `held` reaches the API; SIGKILL it there."""
    approving = crash.bot.popen("approve", "INC-1", "--as", "cli:bob")
    poll(
        lambda: held.arrived.is_set() or approving.poll() is not None,
        what=f"approve to send {held.method} {held.path_contains}",
        seconds=WAIT,
    )
    assert held.arrived.is_set(), f"approve exited with {approving.returncode} first"
    kill(approving)


def release(crash: Crash, held: Stall, *, status: int | None) -> None:
    """Let the dead client's request go on (applied, or answered `status`) and wait until the
    fake recorded its answer."""
    assert held.request is not None
    asked = held.request
    held.release(status=status)
    poll(
        lambda: any((r.method, r.path, r.body) == asked for r in crash.kube.requests),
        what="the held request to be answered",
        seconds=WAIT,
    )


def stop_evicted_load(crash: Crash, *, unless_exited: subprocess.Popen[str] | None = None) -> None:
    """Once the API accepted every eviction, the evicted load stops on the fleet, as it does on
    a real node (the fake does not run workloads), so the verification can pass."""
    poll(
        lambda: (
            not evictable(crash.kube, NODE)
            or (unless_exited is not None and unless_exited.poll() is not None)
        ),
        what="the drain's evictions to reach the API",
        seconds=WAIT,
    )
    crash.fleet.drain(NODE, grace=timedelta(seconds=30))


def finish_by_serve(crash: Crash) -> None:
    """The next `serve` takes the remediation over; the real alert's resolution resolves it."""
    url = crash.bot.serve()
    stop_evicted_load(crash)
    reach(crash, "the remediation to verify", "monitoring")
    crash.post(url, status="resolved")
    reach(crash, "the incident to resolve", "resolved")


def reach(crash: Crash, what: str, state: str) -> None:
    """Wait (up to SETTLE seconds: the machine may be busy) until the incident is in `state`;
    on a timeout, say where it stopped."""
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        incidents = database_state(crash)["incidents"]
        if incidents and all(found[0] == state for found in incidents):
            return
        time.sleep(0.2)
    held = database_state(crash)
    raise AssertionError(f"timed out waiting for {what}; the database holds {held}")


# --- what an uninterrupted run leaves ---------------------------------------------------------


EXPECTED = {
    "incidents": [("resolved", RUNBOOK, NODE, "gpu_hardware", (NODE,))],
    "runs": ["completed"],
    "actions": [
        ("cordon", NODE, "succeeded"),
        ("drain", NODE, "succeeded"),
        ("open_ticket", NODE, "succeeded"),
    ],
    "verifications": ["verification_passed"],
}
"""The database after the uninterrupted journey (test_ecc_storm_on_kubernetes.py)."""
ACTIONS_ON_THE_TIMELINE = ["cordon", "drain", "open_ticket"]
"""One `action_succeeded` event each, after the uninterrupted journey."""

def database_state(crash: Crash) -> dict[str, Any]:
    engine = make_engine(crash.bot.db_url)
    with session_scope(engine) as session:
        incidents = [
            (i.state, i.runbook, i.target, i.layer, tuple(i.culprits))
            for i in session.exec(select(Incident))
        ]
        runs = sorted(r.status for r in session.exec(select(RunbookRun)))
        actions = sorted((a.action, a.target, a.status) for a in session.exec(select(ActionRow)))
        approvals = [a.state for a in session.exec(select(ApprovalRow))]
        events = [(e.kind, e.summary, e.payload) for e in session.exec(select(TimelineEvent))]
    engine.dispose()
    return {
        "incidents": incidents,
        "runs": runs,
        "actions": actions,
        "approvals": approvals,
        "on_the_timeline": sorted(
            str(p.get("action")) for kind, _, p in events if kind == "action_succeeded"
        ),
        "verifications": [kind for kind, _, _ in events if kind.startswith("verification")],
        "taken_over": [s for kind, s, _ in events if kind == "note" and "taken over" in s],
    }


def assert_like_an_uninterrupted_run(crash: Crash) -> None:
    """The end state of an uninterrupted run, each write once, each action on the timeline
    once, and the cordon marked done on the node."""
    state = database_state(crash)
    assert {k: state[k] for k in EXPECTED} == EXPECTED
    assert state["taken_over"], "the timeline does not show the takeover"
    assert state["on_the_timeline"] == ACTIONS_ON_THE_TIMELINE
    assert_each_write_once(crash.kube, crash.evictions)
    assert CORDONED_AT in crash.kube.node(NODE)["metadata"]["annotations"]


def assert_each_write_once(kube: FakeKube, evictions: set[str]) -> None:
    """One cordon PATCH applied, no node PATCH applied twice, each pod's eviction accepted at
    most once and the drain's pods all evicted, never a DELETE; the node cordoned and owned."""
    applied = [p for p in kube.sent("PATCH", path=f"/api/v1/nodes/{NODE}") if p.status == 200]
    cordons = [p for p in applied if _sets(p.body, "spec", "unschedulable") is True]
    assert len(cordons) == 1, cordons
    bodies = Counter(json.dumps(p.body, sort_keys=True) for p in applied)
    assert [b for b, n in bodies.items() if n > 1] == []
    accepted = Counter(
        r.path for r in kube.sent("POST") if r.path.endswith("/eviction") and r.status == 201
    )
    assert set(accepted) == evictions
    assert max(accepted.values()) == 1
    assert not kube.sent("DELETE")
    node = kube.node(NODE)
    assert node["spec"]["unschedulable"] is True
    assert set(MARKERS) <= set(node["metadata"]["annotations"])


def is_cordon(body: Any) -> bool:
    return _sets(body, "spec", "unschedulable") is True


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "answer"), [("cordon-applied", None), ("cordon-refused", 503)])
def test_approve_killed_during_the_cordon_patch(
    tmp_path: Path, world: World, case: str, answer: int | None
) -> None:
    with crash_stack(tmp_path, world, case) as crash:
        triage_to_approval(crash)
        held = crash.kube.stall("PATCH", f"/api/v1/nodes/{NODE}", where=is_cordon)
        kill_approve_at(crash, held)
        release(crash, held, status=answer)
        applied = crash.kube.node(NODE)["spec"].get("unschedulable")
        assert applied is (True if answer is None else None)
        crashed = database_state(crash)
        assert crashed["approvals"] == ["approved"]
        assert ("cordon", NODE, "running") in crashed["actions"]

        finish_by_serve(crash)
        assert_like_an_uninterrupted_run(crash)


@pytest.mark.parametrize(("case", "answer"), [("evict-applied", None)])
def test_approve_killed_during_an_eviction_is_finished_by_the_next_serve(
    tmp_path: Path, world: World, case: str, answer: int | None
) -> None:
    with crash_stack(tmp_path, world, case) as crash:
        triage_to_approval(crash)
        held = crash.kube.stall("POST", "/eviction")
        kill_approve_at(crash, held)
        release(crash, held, status=answer)
        crashed = database_state(crash)
        assert ("cordon", NODE, "succeeded") in crashed["actions"]
        assert ("drain", NODE, "running") in crashed["actions"]

        finish_by_serve(crash)
        assert_like_an_uninterrupted_run(crash)


def test_approve_killed_during_a_refused_eviction_is_finished_by_a_second_approve(
    tmp_path: Path, world: World
) -> None:
    with crash_stack(tmp_path, world, "evict-refused") as crash:
        crash.bot.extra_env["GPU_ONCALL_WORK__LEASE_SECONDS"] = "30"
        triage_to_approval(crash)
        held = crash.kube.stall("POST", "/eviction")
        kill_approve_at(crash, held)
        assert held.request is not None
        first_pod = held.request[1]
        release(crash, held, status=500)  # the API failed it after the client died
        assert first_pod in evictable(crash.kube, NODE)

        refused = crash.bot.run("approve", "INC-1", "--as", "cli:carol")
        assert refused.returncode != 0
        assert "already being resumed by worker" in refused.stdout + refused.stderr
        engine = make_engine(crash.bot.db_url)  # 30 s pass: the dead worker's lease ends
        with session_scope(engine) as session:
            session.connection().exec_driver_sql(
                "UPDATE work_items SET lease_expires_at = '2000-01-01 00:00:00.000000'"
                " WHERE state = 'pending'"
            )
        engine.dispose()
        again = crash.bot.popen("approve", "INC-1", "--as", "cli:carol")
        stop_evicted_load(crash, unless_exited=again)
        out, _ = again.communicate(timeout=WAIT)
        assert again.returncode == 0, out
        assert database_state(crash)["incidents"][0][0] == "monitoring"

        url = crash.bot.serve()
        crash.post(url, status="resolved")
        reach(crash, "the incident to resolve", "resolved")
        assert_like_an_uninterrupted_run(crash)
        tries = [r.status for r in crash.kube.sent("POST", path=first_pod)]
        assert tries == [500, 201]  # evicted again after the failure, accepted once


def test_approve_killed_after_the_decision_before_any_write(tmp_path: Path, world: World) -> None:
    with crash_stack(tmp_path, world, "before-writes") as crash:
        triage_to_approval(crash)
        # after the claim, before any write: the act-time NodeHealthCheck read (the node's own
        # GET now comes first, in the safety guard's observation before the claim)
        held = crash.kube.stall("GET", "/apis/remediation.medik8s.io/v1alpha1/nodehealthchecks")
        kill_approve_at(crash, held)
        release(crash, held, status=None)
        crashed = database_state(crash)
        assert crashed["approvals"] == ["approved"]  # the decision committed
        assert crashed["actions"] == [("cordon", NODE, "running")]
        assert writes(crash.kube) == []

        finish_by_serve(crash)
        assert_like_an_uninterrupted_run(crash)

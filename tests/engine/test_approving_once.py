"""The approval use case (bot/engine/approving.py) from the command line's side, and two
deciders at once, on SQLite and on the session's real PostgreSQL.

Covers: `gpu-oncall approve` (the CLI adapter, in-process) reads the approval rows once and
resolves the policy once while deciding; a refusal by the policy is on the incident's timeline
for the CLI as for Slack, and the approval stays pending; an approval given after its expiry
says so on the terminal, as Slack's ephemeral reply does; two people deciding the same approval
at once (both having read it pending) give one decision, each action runs once, and the other
is told who decided; an unknown reference and an incident with nothing pending are outcomes
that say so.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Collection
from pathlib import Path

import pytest
from sqlmodel import select

from bot.cli import runs
from bot.cli.terminal import Terminal
from bot.config import PolicySettings, Settings, StorageSettings
from bot.engine.approving import Approving
from bot.engine.decisions import Decide, Decided, NotPending, Outcome, Unknown
from bot.errors import PolicyDenied
from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.wiring.runtime import Runtime, open_runtime
from bot.wiring.simulation import simulated_webhook
from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import ActionRow
from tests.engine.approval_reads import counting

NODE = "gpu-node-03"
BARRIER_SECONDS = 60.0
"""A bound on the wait for the other decider, never a timing assertion."""


def waiting(settings: Settings, scenario: Path) -> tuple[int, str]:
    """The scenario's alert triaged to its approval: (incident id, run id)."""
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        incident_id = _fire(rt)
        started = rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": NODE},
            incident_id=incident_id,
            requester="alertmanager",
        )
        assert started.status == "awaiting_approval"
        return incident_id, started.run_id


def _fire(rt: Runtime) -> int:
    assert rt.scenario is not None and rt.fleet is not None
    alert = rt.scenario.trigger.alert
    starts = rt.fleet.t0 + rt.scenario.faults[0].start
    body = simulated_webhook(
        "firing", alert.alertname, dict(alert.labels), starts_at=starts, ends_at=None
    )
    with session_scope(rt.db) as session:
        received = receive_webhook(
            session, parse_webhook(body), routes=rt.catalog.alert_routes(), at=rt.clock.now()
        )
    return int(received[0].incident_id)


def approve(settings: Settings, term: Terminal, *, actor: str) -> int:
    return runs.decide(
        settings,
        term,
        ref="INC-1",
        decision="approve",
        actor=actor,
        reason="",
        scenario=None,
        as_json=False,
    )


def test_the_cli_reads_the_approval_once_and_resolves_the_policy_once(
    settings: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting(settings, scenario_dir / "ecc-dbe-storm.yaml")
    out = io.StringIO()
    with counting(monkeypatch, [(runs, "decide")]) as tally:
        assert approve(settings, Terminal(out), actor="cli:bob") == 0
    assert tally.per_decision() == [(1, 1)]
    assert "completed; INC-1 is" in out.getvalue()


def test_a_refusal_is_on_the_timeline_for_the_cli_too(tmp_path: Path, scenario_dir: Path) -> None:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        policy=PolicySettings(approvers=["cli:dave"]),
    )
    incident_id, _run = waiting(settings, scenario_dir / "ecc-dbe-storm.yaml")
    with pytest.raises(PolicyDenied, match="cli:bob is not an approver"):
        approve(settings, Terminal(io.StringIO()), actor="cli:bob")
    with open_runtime(settings) as rt, session_scope(rt.db) as session:
        events = incident_store.list_events(session, incident_id)
        incident = incident_store.get_incident(session, incident_id)
    notes = [e.summary for e in events if e.actor == "cli:bob"]
    assert notes == ["Approval by cli:bob refused: cli:bob is not an approver (approvers: "
                     "cli:dave); ask one of them to approve (the list is "
                     "GPU_ONCALL_POLICY__APPROVERS)"]  # fmt: skip
    assert incident is not None and incident.state == "awaiting_approval"


def test_an_approval_after_its_expiry_says_so_on_the_terminal(
    settings: Settings, scenario_dir: Path
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    waiting(settings, scenario)
    with open_runtime(settings, scenario_path=scenario) as rt:  # the fleet's clock is saved
        rt.clock.advance(rt.deps.policy.approval_ttl)  # type: ignore[attr-defined]
    out = io.StringIO()
    assert approve(settings, Terminal(out), actor="cli:bob") == 0
    told = " ".join(out.getvalue().split())
    assert "The approval for INC-1 expired at" in told and "so nothing was done" in told
    assert f"start a fresh run: gpu-oncall run ecc-storm node={NODE}" in told


def _race(rt: Runtime, run_id: str) -> tuple[Outcome, Outcome]:
    """Two people approve at once: both read the approval pending before either decides."""
    both_read = threading.Barrier(2, timeout=BARRIER_SECONDS)

    def groups(_approvers: frozenset[str]) -> Collection[str]:
        both_read.wait()  # between the one read and the conditional decision
        return ()

    outcomes: dict[str, Outcome] = {}

    def decide(actor: str) -> None:
        request = Decide(ref=run_id, decision="approve", actor=actor, groups=groups)
        outcomes[actor] = Approving.of(rt.engine).decide(request)

    threads = [threading.Thread(target=decide, args=(a,)) for a in ("cli:bob", "cli:carol")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes["cli:bob"], outcomes["cli:carol"]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'oncall.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    return Settings(storage=StorageSettings(url=url))


def test_two_deciders_at_once_give_one_decision(
    backend: Settings, scenario_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    _incident, run_id = waiting(backend, scenario)
    with open_runtime(backend, scenario_path=scenario) as rt:
        with counting(monkeypatch, [(Approving, "decide")]) as tally:
            bob, carol = _race(rt, run_id)
        assert rt.fleet is not None
        assert (rt.fleet.cordon_calls[NODE], rt.fleet.drain_calls[NODE]) == (1, 1)
        with session_scope(rt.db) as session:
            actions = sorted(a.action for a in session.exec(select(ActionRow)))
    assert actions == ["cordon", "drain", "open_ticket"]
    winner = "cli:bob" if isinstance(bob, Decided) else "cli:carol"
    won, lost = (bob, carol) if winner == "cli:bob" else (carol, bob)
    assert isinstance(won, Decided) and won.state == "approved"
    assert isinstance(lost, NotPending) and lost.decided is not None
    assert (lost.decided.state, lost.decided.actor) == ("approved", winner)
    assert "has no pending approval: it was already approved by" in lost.text()
    # one read each, and the loser reads once more to say who decided; one policy each
    assert sorted(tally.per_decision()) == [(1, 1), (2, 1)]


def test_nothing_to_decide_is_an_outcome(settings: Settings, scenario_dir: Path) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    _incident, run_id = waiting(settings, scenario)
    with open_runtime(settings, scenario_path=scenario) as rt:
        deciding = Approving.of(rt.engine)
        assert deciding.decide(Decide(ref="INC-9", decision="approve", actor="cli:bob")) == (
            Unknown("INC-9")
        )
        done = deciding.decide(Decide(ref=run_id[:8], decision="reject", actor="cli:bob"))
        assert isinstance(done, Decided) and done.state == "rejected"
        again = deciding.decide(Decide(ref="INC-1", decision="approve", actor="cli:carol"))
    assert isinstance(again, NotPending)
    assert again.text().startswith("INC-1 (")
    assert "has no pending approval: it was already rejected by cli:bob at" in again.text()

"""The journeys of DESIGN §1 driven from the command line: an alert triaged end to end (the
demo), a command-started run, and resuming a run at its approval.

Presentation goes through `bot.cli.terminal`; state changes through intake, engine and lifecycle.
The simulator is imported lazily (`bot.wiring.simulation`), only when the runtime has a fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.actions import outcomes
from bot.actions.impact import approval_notes
from bot.actions.policy import (
    TWO_PERSON_SETTING,
    Risk,
    two_person_refusal,
    two_person_risks_of,
)
from bot.cli.terminal import Terminal
from bot.engine.loading import LoadedRunbook
from bot.engine.running import RunOutcome
from bot.errors import NotFound, OncallError, PolicyDenied, UserInputError
from bot.incidents.mttr import DEFINITIONS, format_duration
from bot.incidents.views import event_views, incident_view
from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.wiring.runtime import Runtime
from storage import incidents as incident_store
from storage.db import session_scope

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from bot.clock import Clock
    from bot.config import PagesSettings
    from bot.wiring.simulation import Simulation


def alert_journey(rt: Runtime, term: Terminal, *, yes: bool, user: str, interactive: bool) -> int:
    """Journey 2 on the simulated fleet: the scenario's alert is triaged, remediated after
    approval, and resolved (the demo). Needs sim mode: a real alert comes from Alertmanager."""
    sim = _simulation(rt)
    from bot.wiring.simulation import simulated_webhook  # sim mode only

    scenario = sim.scenario
    trigger = scenario.trigger.alert
    if trigger is None:
        raise NotFound(
            f"scenario '{scenario.name}' has no alert trigger; use `gpu-oncall diagnose`"
        )
    term.heading(f"Scenario {scenario.name}: {len(sim.fleet.node_names)} simulated nodes")
    if scenario.metadata.description:
        term.line(f"  {scenario.metadata.description.strip()}")
    fired_at = sim.fault_start()
    webhook = simulated_webhook(
        "firing", trigger.alertname, dict(trigger.labels), starts_at=fired_at, ends_at=None
    )
    term.heading("Alert received from Alertmanager")
    labels = " ".join(f'{k}="{v}"' for k, v in webhook["alerts"][0]["labels"].items())
    term.line(f"  {trigger.alertname} firing since {fired_at:%H:%M:%S} UTC  {{{labels}}}")
    db = rt.db
    with session_scope(db) as session:
        received = receive_webhook(
            session, parse_webhook(webhook), routes=rt.catalog.alert_routes(), at=rt.clock.now()
        )[0]
    if received.unroutable or received.incident_id is None or received.runbook is None:
        term.line(f"  stored, but not routed: {received.unroutable}")
        return 1
    ref = f"INC-{received.incident_id}"
    if not received.start_run:
        term.line(f"  attached to the open incident {ref}; no second run started")
        return 0
    loaded = rt.catalog.get(received.runbook)
    term.line(f"  -> {ref} opened; routed to runbook '{loaded.name}' for {received.target}")
    started = _run(
        rt,
        term,
        loaded,
        {received.target_input or "node": received.target},
        received.incident_id,
        "alertmanager",
    )
    outcome = _approval(rt, term, started, yes=yes, user=user, interactive=interactive)
    if outcome is None:
        return 0
    after_run(rt, term, outcome)
    settle_simulated_alert(rt, term, received.incident_id)
    print_incident(db, term, received.incident_id, pages=rt.settings.pages)
    write_html_postmortem(db, term, received.incident_id, pages=rt.settings.pages, clock=rt.clock)
    return 0


def settle_simulated_alert(rt: Runtime, term: Terminal, incident_id: int) -> None:
    """In sim mode, once a fix is verified, play Alertmanager's part: the scenario's alert
    resolves. Outside sim mode nothing is faked: the real alert's resolution resolves it."""
    if rt.sim is None or not _mitigated(rt.db, incident_id):
        return
    from bot.wiring.simulation import settle_alert

    name = settle_alert(rt.sim, db=rt.db, routes=rt.catalog.alert_routes(), now=rt.clock.now())
    if name is None:
        return
    term.heading("Alert resolved")
    term.line(f"  {name} resolved: its signal stayed clear after the remediation")


def _simulation(rt: Runtime) -> Simulation:
    if rt.sim is None:
        raise UserInputError(
            "the demo runs on the simulated fleet (GPU_ONCALL_CLUSTER and GPU_ONCALL_TELEMETRY "
            "unset or sim); on a real cluster alerts come from Alertmanager (`gpu-oncall serve`)"
        )
    return rt.sim


def command_journey(
    rt: Runtime,
    term: Terminal,
    *,
    loaded: LoadedRunbook,
    inputs: Mapping[str, Any],
    yes: bool,
    user: str,
    interactive: bool,
) -> RunOutcome:
    """Journey 1 from the CLI: a person starts a runbook; the incident records it."""
    from bot.engine.inputs import resolve_inputs

    resolved = resolve_inputs(loaded, inputs)
    incident_id, target = rt.engine.open_incident(loaded, resolved, actor=user)
    term.heading(f"INC-{incident_id}: running runbook '{loaded.name}' on {target}")
    outcome = _run(rt, term, loaded, resolved, incident_id, user)
    final = _approval(rt, term, outcome, yes=yes, user=user, interactive=interactive)
    if final is not None:
        after_run(rt, term, final)
        print_incident(rt.db, term, incident_id, pages=rt.settings.pages, timeline=False)
    return final or outcome


def _run(
    rt: Runtime,
    term: Terminal,
    loaded: LoadedRunbook,
    inputs: Mapping[str, Any],
    incident_id: int,
    requester: str,
) -> RunOutcome:
    outcome = rt.engine.start(
        loaded, inputs=inputs, incident_id=incident_id, requester=requester, on_step=term.step
    )
    term.heading("Diagnosis")
    term.verdict(outcome.verdict)
    return outcome


def _approval(
    rt: Runtime, term: Terminal, outcome: RunOutcome, *, yes: bool, user: str, interactive: bool
) -> RunOutcome | None:
    if outcome.status != "awaiting_approval" or outcome.approval is None:
        return outcome
    term.heading(
        f"Approval needed ({outcome.incident}, expires {_hhmm(outcome.approval['expires_at'])} UTC)"
    )
    term.proposals(outcome.approval.get("proposals", []))
    for line in approval_notes(outcome.approval):
        term.line(f"    {line}")
    if yes:
        _refuse_self_approval(rt, term, outcome, user=user)
        answer = "y"
        term.line(f"  --yes: approving as {user}")
    elif interactive:
        answer = input("  Approve these actions? [y/N] ").strip().lower()
    else:
        term.line("  No terminal to ask on, and --yes was not given: the run waits, checkpointed.")
        term.line(f"  Approve with:  gpu-oncall approve {outcome.incident}")
        if _self_approval_barred(rt, outcome, user=user):
            term.line(
                f"  (by another approver: {user} requested it, and the two-person rule "
                f"({TWO_PERSON_SETTING}) bars approving your own request)"
            )
        term.line(f"  Reject with:   gpu-oncall reject {outcome.incident} --reason '...'")
        return None
    decision = "approve" if answer in ("y", "yes") else "reject"
    term.heading("Remediation")
    try:
        return rt.engine.resume(outcome.run_id, decision=decision, actor=user, on_step=term.step)
    except PolicyDenied:  # the caller reports the refusal and exits 2
        pending = f"an approver runs gpu-oncall approve {outcome.incident}"
        term.line(f"  The approval stays pending: {pending}")
        raise
    except OncallError as exc:
        term.line(f"  refused: {exc}")
        term.line(f"  The approval stays pending: gpu-oncall approve {outcome.incident}")
        return None


def _self_approval_barred(rt: Runtime, outcome: RunOutcome, *, user: str) -> list[str]:
    """The risks of the waiting approval the two-person rule bars `user` (its requester) from
    approving; empty when `user` may approve it."""
    approval = outcome.approval or {}
    if str(approval.get("requester", "")) != user:
        return []
    policy = rt.engine.policy_for(outcome.runbook)
    return two_person_risks_of(policy, [Risk(p["risk"]) for p in approval.get("proposals", [])])


def _refuse_self_approval(rt: Runtime, term: Terminal, outcome: RunOutcome, *, user: str) -> None:
    """Say up front, before trying, when `--yes` cannot approve: `user` requested the run and the
    two-person rule covers one of its actions. Raises PolicyDenied (exit 2); the run waits."""
    high = _self_approval_barred(rt, outcome, user=user)
    if not high:
        return
    policy = rt.engine.policy_for(outcome.runbook)
    term.line(
        f"  --yes cannot approve: {user} requested this run, and the two-person rule "
        f"forbids approving your own {'/'.join(high)}-risk request."
    )
    term.line("  The run waits, checkpointed, for another approver to run:")
    term.line(f"    gpu-oncall approve {outcome.incident}")
    raise PolicyDenied(
        two_person_refusal(policy, requester=user, risks=high, runbook=outcome.runbook)
    )


def after_run(rt: Runtime, term: Terminal, outcome: RunOutcome) -> None:
    with session_scope(rt.db) as session:
        incident = incident_store.get_incident(session, outcome.incident)
        state = incident.state if incident else "unknown"
    term.line()
    term.line(f"  Run {outcome.run_id[:8]} {outcome.status}; {outcome.incident} is {state}.")
    results = outcomes.action_results(outcome.steps)
    if outcomes.not_fully_done(results):
        term.line(f"  Acted, not fully: {outcomes.describe(results)}")


def acted_exit_code(outcome: RunOutcome) -> int:
    """The CLI's exit code for a finished run: 1 when an approved action failed (or some were
    done and some not: the node is in between), else 0. 2 stays "bad input"."""
    results = outcomes.action_results(outcome.steps)
    failed = any(r.get("outcome") == "failed" for r in results)
    return 1 if failed or outcomes.partly_done(results) else 0


def still_pending(term: Terminal, outcome: RunOutcome) -> None:
    """After a partial approval: the actions still awaiting one, their expiry and the command."""
    if outcome.status != "awaiting_approval" or outcome.approval is None:
        return
    term.heading(
        f"Still awaiting approval ({outcome.incident}, expires "
        f"{_hhmm(outcome.approval['expires_at'])} UTC)"
    )
    term.proposals(outcome.approval.get("proposals", []))
    term.line(f"  Approve with:  gpu-oncall approve {outcome.incident} [--only ACTION]")
    term.line(f"  Reject with:   gpu-oncall reject {outcome.incident} --reason '...'")


def print_incident(
    db: Engine, term: Terminal, incident_id: int, *, pages: PagesSettings, timeline: bool = True
) -> None:
    with session_scope(db) as session:
        row = incident_store.get_incident(session, incident_id)
        if row is None:
            raise NotFound(f"unknown incident INC-{incident_id}")
        view = incident_view(row)
        events = event_views(incident_store.list_events(session, incident_id))
    if timeline:
        term.heading(f"Timeline of {view.ref} (state: {view.state})")
        for event in events:
            term.line(f"  {event.at:%H:%M:%S}  {event.actor:<14} {event.kind:<20} {event.summary}")
    term.heading(f"{view.ref} figures")
    figures = view.figures()
    for definition in DEFINITIONS:
        value = getattr(figures, definition.name)
        term.line(f"  {definition.label:<18} {format_duration(value):>10}   ({definition.formula})")
    url = pages.incident_url(view.ref)
    if url is not None:
        term.line(f"  page: {url}")


def write_html_postmortem(
    db: Engine, term: Terminal, incident_id: int, *, pages: PagesSettings, clock: Clock
) -> Path:
    """Write the incident's HTML postmortem beside the SQLite database (else under
    `.gpu-oncall/`) and print its path, and its page's URL when `pages.base_url` is set."""
    from bot.incidents.reporting import read_postmortem  # jinja2 only when a page is written

    ref = f"INC-{incident_id}"
    url = pages.incident_url(ref)
    with session_scope(db) as session:
        page = read_postmortem(session, incident_id, fmt="html", page_url=url, now=clock.now())
    database = db.url.database if db.url.get_backend_name() == "sqlite" else None
    folder = Path(database).parent if database else Path(".gpu-oncall")
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / f"{ref}-postmortem.html").resolve()
    path.write_text(page, encoding="utf-8")
    term.heading("Postmortem")
    if url:
        term.line(f"  live page: {url}")
    term.line(f"  HTML postmortem written to {path}")
    return path


def _mitigated(db: Engine, incident_id: int) -> bool:
    with session_scope(db) as session:
        row = incident_store.get_incident(session, incident_id)
        return row is not None and row.mitigated_at is not None and row.state != "resolved"


def _hhmm(value: str) -> str:
    return datetime.fromisoformat(value).strftime("%H:%M")

"""`gpu-oncall demo`, `diagnose`, `run`, `approve` and `reject`: runs of runbooks over the runtime
from `bot.wiring` (importing this module loads the engine and LangGraph)."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.cli import journeys
from bot.cli.terminal import Terminal
from bot.config import Settings
from bot.engine.approving import Approving
from bot.engine.decisions import Decide, Decided, decided_run
from bot.engine.running import RunOutcome
from bot.wiring.runtime import open_runtime, simulated


def demo(settings: Settings, term: Terminal, *, scenario: Path | None, yes: bool, user: str) -> int:
    with open_runtime(settings, scenario_path=scenario, fresh=True) as rt:
        return journeys.alert_journey(rt, term, yes=yes, user=user, interactive=sys.stdin.isatty())

def run_runbook(
    settings: Settings,
    term: Terminal,
    *,
    runbook: str,
    inputs: Mapping[str, Any],
    scenario: Path | None,
    as_json: bool,
    yes: bool,
    user: str,
) -> int:
    with open_runtime(settings, scenario_path=scenario) as rt:
        loaded = rt.catalog.get(runbook)
        quiet = Terminal(io.StringIO()) if as_json else term
        outcome = journeys.command_journey(
            rt,
            quiet,
            loaded=loaded,
            inputs=inputs,
            yes=yes,
            user=user,
            interactive=sys.stdin.isatty() and not as_json,
        )
        if as_json:
            term.line(json.dumps(outcome_json(outcome), indent=2, default=str))
    return journeys.acted_exit_code(outcome)

def decide(
    settings: Settings,
    term: Terminal,
    *,
    ref: str,
    decision: str,
    actor: str,
    reason: str,
    scenario: Path | None,
    as_json: bool,
    only: Sequence[str] = (),
) -> int:
    """`approve`/`reject`: the approval use case (bot/engine/approving.py), rendered as text and
    an exit code (a refusal exits 2 through main's one error boundary, as any bad request)."""
    with open_runtime(settings, scenario_path=_decision_scenario(settings, scenario)) as rt:
        quiet = Terminal(io.StringIO()) if as_json else term
        request = Decide(ref=ref, decision=decision, actor=actor, reason=reason, only=tuple(only))
        decided = Approving.of(rt.engine).decide(request, on_step=quiet.step)
        outcome = decided_run(decided)
        journeys.after_run(rt, quiet, outcome)
        if isinstance(decided, Decided) and decided.state == "expired":
            quiet.line(expired_line(decided))
        journeys.still_pending(quiet, outcome)
        incident_id = int(outcome.incident.removeprefix("INC-"))
        journeys.settle_simulated_alert(rt, quiet, incident_id)  # sim mode only
        if as_json:
            term.line(json.dumps(outcome_json(outcome), indent=2, default=str))
    return journeys.acted_exit_code(outcome)


def expired_line(decided: Decided) -> str:
    """What an approval given after its expiry did: nothing; and how to ask again (the same words
    as Slack's ephemeral reply)."""
    run = decided.run
    expires_at = decided.approval.expires_at if decided.approval is not None else None
    when = f" at {expires_at:%H:%M} UTC" if expires_at else ""
    inputs = " ".join(f"{k}={v}" for k, v in run.inputs.items() if k != "requester")
    retry = f"gpu-oncall run {run.runbook} {inputs}".strip()
    return (
        f"  The approval for INC-{run.incident_id} expired{when}, so nothing was done. "
        f"If the fault persists, start a fresh run: {retry}"
    )


def _decision_scenario(settings: Settings, given: Path | None) -> Path | None:
    """The scenario an approval continues on: the one given, else the fleet's saved one (sim
    mode only; on a real cluster there is none, and one given is refused by `open_runtime`)."""
    if given is not None or not simulated(settings):
        return given
    from bot.wiring.simulation import saved_scenario

    return saved_scenario(settings)

def outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    verdict = outcome.verdict
    return {
        "run_id": outcome.run_id,
        "incident": outcome.incident,
        "runbook": outcome.runbook,
        "status": outcome.status,
        "verdict": verdict,
        "approval": outcome.approval,
        "steps": outcome.steps,
    }

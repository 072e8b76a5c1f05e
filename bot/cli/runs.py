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
    with open_runtime(settings, scenario_path=_decision_scenario(settings, scenario)) as rt:
        run_id = journeys.find_pending_run(rt, ref)
        quiet = Terminal(io.StringIO()) if as_json else term
        outcome = rt.engine.resume(
            run_id, decision=decision, actor=actor, reason=reason, on_step=quiet.step, only=only
        )
        journeys.after_run(rt, quiet, outcome)
        journeys.still_pending(quiet, outcome)
        incident_id = int(outcome.incident.removeprefix("INC-"))
        journeys.settle_simulated_alert(rt, quiet, incident_id)  # sim mode only
        if as_json:
            term.line(json.dumps(outcome_json(outcome), indent=2, default=str))
    return journeys.acted_exit_code(outcome)

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

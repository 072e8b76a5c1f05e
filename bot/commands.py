"""What each CLI command does, over the runtime from `wiring` (the CLI only parses arguments).

Every command prints with `bot.terminal`; `--json` variants print machine-readable output.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot import journeys
from bot.config import Settings
from bot.engine.catalog import validate_files
from bot.engine.compiling import render_mermaid
from bot.engine.running import RunOutcome
from bot.errors import NotFound
from bot.incidents.mttr import compute_figures, format_duration
from bot.incidents.postmortem import render_postmortem
from bot.incidents.views import event_views, incident_view
from bot.terminal import Terminal
from bot.wiring import load_catalogs, open_runtime
from runbooks import RUNBOOK_DIR
from storage import incidents as incident_store
from storage.db import session_scope


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
    return 0


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
) -> int:
    scenario_path = scenario or journeys.saved_scenario(settings)
    with open_runtime(settings, scenario_path=scenario_path) as rt:
        run_id = journeys.find_pending_run(rt, ref)
        quiet = Terminal(io.StringIO()) if as_json else term
        outcome = rt.engine.resume(
            run_id, decision=decision, actor=actor, reason=reason, on_step=quiet.step
        )
        journeys.after_run(rt, quiet, outcome)
        incident_id = int(outcome.incident.removeprefix("INC-"))
        journeys.settle_simulated_alert(rt, quiet, incident_id)
        if as_json:
            term.line(json.dumps(outcome_json(outcome), indent=2, default=str))
    return 0


def list_incidents(
    settings: Settings, term: Terminal, *, include_resolved: bool, as_json: bool
) -> int:
    from storage.db import create_schema, make_engine

    db = make_engine(settings.storage.url)
    create_schema(db)
    with session_scope(db) as session:
        rows = incident_store.list_incidents(session, open_only=not include_resolved)
        views = [incident_view(row) for row in rows]
    if as_json:
        term.line(json.dumps([v.to_dict() for v in views], indent=2, default=str))
        return 0
    if not views:
        term.line("No open incidents." if not include_resolved else "No incidents.")
        return 0
    term.line(
        f"{'ID':<8} {'STATE':<18} {'SEVERITY':<9} {'RUNBOOK':<16} {'TARGET':<16} {'LAYER':<13} MTTR"
    )
    for v in views:
        figures = compute_figures(**v.timestamps())
        mttr = format_duration(figures.mttr) if figures.mttr else "-"
        term.line(
            f"{v.ref:<8} {v.state:<18} {v.severity:<9} {v.runbook:<16} {v.target:<16} "
            f"{v.layer or '-':<13} {mttr}"
        )
    return 0


def postmortem(settings: Settings, term: Terminal, *, ref: str, fmt: str, pinned: bool) -> int:
    from storage.db import create_schema, make_engine

    db = make_engine(settings.storage.url)
    create_schema(db)
    with session_scope(db) as session:
        row = incident_store.get_incident(session, ref)
        if row is None:
            raise NotFound(f"unknown incident '{ref}' (see `gpu-oncall incidents --all`)")
        assert row.id is not None
        view = incident_view(row)
        events = event_views(incident_store.list_events(session, row.id))
    term.line(render_postmortem(view, events, fmt, pinned_only=pinned).rstrip("\n"))
    return 0


def validate_runbooks(settings: Settings, term: Terminal, *, paths: list[Path]) -> int:
    signals, actions, _ = _catalogs_without_runbooks(settings)
    dirs = paths or [RUNBOOK_DIR, *settings.runbook_dirs]
    loaded, errors = validate_files(dirs, signals=signals, actions=actions)
    for item in loaded:
        term.line(f"ok      {item.file} ({item.name}, {len(item.runbook.steps)} steps)")
    for error in errors:
        term.line(f"error   {error}")
    if not loaded and not errors:
        term.line(f"no runbook files in {', '.join(str(d) for d in dirs)}")
        return 2
    term.line(f"{len(loaded)} valid, {len(errors)} invalid")
    return 2 if errors else 0


def list_runbooks(settings: Settings, term: Terminal) -> int:
    _, _, catalog = load_catalogs(settings)
    for name in catalog.names():
        rb = catalog.get(name).runbook
        alerts = ", ".join(a.alertname for a in rb.triggers.alerts) or "-"
        verbs = ", ".join(f"/gpu {c}" for c in rb.triggers.commands) or "-"
        term.line(f"{name:<22} {rb.metadata.title}  [alerts: {alerts}; commands: {verbs}]")
    return 0


def graph_runbook(settings: Settings, term: Terminal, *, name: str) -> int:
    _, _, catalog = load_catalogs(settings)
    term.line(render_mermaid(catalog.get(name)).rstrip("\n"))
    return 0


def _catalogs_without_runbooks(settings: Settings) -> tuple[list[str], list[str], None]:
    from bot.actions.registry import default_registry
    from integrations.signals import load_signal_catalog
    from runbooks import SIGNALS_FILE

    return load_signal_catalog(SIGNALS_FILE).names(), default_registry().names(), None


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

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
from bot.errors import NotFound, UserInputError
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


def list_alerts(
    settings: Settings, term: Terminal, *, unrouted: bool, limit: int, as_json: bool
) -> int:
    """`gpu-oncall alerts [--unrouted]`: received alerts, newest first; unrouted ones with the
    reason no runbook took them (routed again with today's runbooks)."""
    from bot.intake.listing import alert_rows
    from storage.db import create_schema, make_engine

    _, _, catalog = load_catalogs(settings)
    db = make_engine(settings.storage.url)
    create_schema(db)
    with session_scope(db) as session:
        rows = alert_rows(
            session, routes=catalog.alert_routes(), unrouted=unrouted, limit=max(limit, 1)
        )
    if as_json:
        term.line(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        term.line("No unrouted alerts." if unrouted else "No alerts received.")
        return 0
    term.line(f"{'RECEIVED':<20} {'STATUS':<9} {'ALERT':<24} {'INCIDENT':<9} LABELS / REASON")
    for row in rows:
        detail = row["reason"] or " ".join(f"{k}={v}" for k, v in row["labels"].items())
        term.line(
            f"{row['received_at']:%Y-%m-%d %H:%M:%S} {row['status']:<9} {row['alertname']:<24} "
            f"{row['incident'] or '-':<9} {detail}"
        )
    return 0


def serve(
    settings: Settings,
    term: Terminal,
    *,
    host: str | None,
    port: int | None,
    scenario: Path | None,
    socket_mode: bool = False,
) -> int:
    """`gpu-oncall serve`: run the HTTP server until Ctrl-C or SIGTERM; with `socket_mode`,
    Slack events arrive over a Socket Mode connection instead of `POST /slack/events`."""
    import signal

    from bot.scheduler import Jobs
    from bot.server import create_app, serve_forever

    if socket_mode and (settings.slack.bot_token is None or settings.slack.app_token is None):
        raise UserInputError(
            "--socket-mode needs Slack: set GPU_ONCALL_SLACK__BOT_TOKEN and "
            "GPU_ONCALL_SLACK__APP_TOKEN (docs/slack.md)"
        )

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with open_runtime(settings, scenario_path=scenario) as rt:
        app = create_app(settings, rt, socket_mode=socket_mode)
        refresh = app.slack.refresh_incident if app.slack is not None else None
        jobs = Jobs(
            rt.engine, interval_seconds=settings.server.expiry_check_seconds, on_expired=refresh
        ).start()
        mounts = ", ".join(sorted(app.mounts)) or "none"
        socket = None
        if socket_mode and app.slack is not None:
            socket = app.slack.socket_mode()
            socket.connect()
            term.line("gpu-oncall: connected to Slack over Socket Mode")
        try:
            serve_forever(
                app,
                host=host or settings.server.host,
                port=port if port is not None else settings.server.port,
                ready=lambda url: term.line(
                    f"gpu-oncall serving on {url}: POST /alerts, GET /healthz /readyz /metrics; "
                    f"mounted: {mounts}"
                ),
            )
        except KeyboardInterrupt:
            term.line("gpu-oncall: stopping; queued triage runs finish first")
        finally:
            jobs.shutdown()
            if socket is not None:
                socket.close()
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
        storms = ", ".join(rb.triggers.storms)
        extra = f"; storms of: {storms}" if storms else ""
        term.line(f"{name:<22} {rb.metadata.title}  [alerts: {alerts}; commands: {verbs}{extra}]")
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


def evaluate(settings: Settings, term: Terminal, *, paths: list[Path], as_json: bool) -> int:
    """`gpu-oncall eval`: score scenario files; exit 0 even when some diagnoses are wrong."""
    from bot.evaluating import evaluate as run_eval
    from bot.scoring import render_json, render_table

    results = run_eval(paths, settings=settings)
    if as_json:
        term.line(json.dumps(render_json(results), indent=2))
    else:
        for line in render_table(results):
            term.line(line)
    return 0


def sim_serve(term: Terminal, *, scenario: Path, host: str, port: int) -> int:
    """`gpu-oncall sim serve`: a scenario's exporter metrics over HTTP until interrupted.

    The fleet runs on the wall clock from now (its t0), so faults play out in real time and
    Prometheus sees them evolve. Exit 0 on Ctrl-C; 2 if the scenario or the port is bad.
    """
    from bot.clock import SystemClock
    from integrations.errors import IntegrationError
    from integrations.sim import Fleet, load_scenario
    from integrations.sim.exporter import ExporterApp, ExporterServer, exporter_families

    try:
        loaded = load_scenario(scenario)
    except IntegrationError as exc:
        raise UserInputError(str(exc)) from exc
    fleet = Fleet.from_scenario(loaded, now=SystemClock().now)
    try:
        server = ExporterServer(ExporterApp(fleet), host=host, port=port)
    except OSError as exc:
        raise UserInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    nodes, started = len(fleet.node_names), f"{fleet.t0:%H:%M:%S}"
    term.line(f"Scenario '{loaded.name}': {nodes} simulated nodes, t0 {started} UTC")
    term.line(f"Serving {server.url}")
    for family in exporter_families(fleet):
        term.line(f"  {family:<20} {server.url}/{family}")
    term.line("Ctrl-C to stop.")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        term.line("Stopped.")
    finally:
        server.close()
    return 0


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


def classify_log(term: Terminal, *, source: str, as_json: bool) -> int:
    """Classify any text with the log-signature catalog: layer, deciding signature, lines."""
    from bot.diagnosis.logs import classify_text, load_log_catalog
    from runbooks import LOG_SIGNATURES_FILE

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(errors="replace")
    except OSError as exc:
        raise UserInputError(f"cannot read log '{source}': {exc.strerror}") from exc
    found = classify_text(text, load_log_catalog(LOG_SIGNATURES_FILE))
    matches = [
        {
            "line_no": m.line_no,
            "signature": m.signature,
            "layer": m.layer,
            "severity": m.severity,
            "xid": m.xid,
            "line": m.line,
        }
        for m in found.matches
    ]
    if as_json:
        result = {
            "layer": found.layer,
            "signal": found.signal,
            "xids": list(found.xids),
            "matches": matches,
        }
        term.line(json.dumps(result, indent=2))
        return 0
    term.line(f"layer:  {found.layer or 'none (no known signature)'}")
    term.line(f"signal: {found.signal or '-'}")
    if found.xids:
        term.line(f"XIDs:   {', '.join(str(x) for x in found.xids)}")
    for m in found.matches:
        term.line(f"  {m.line_no:>6}  {m.signature:<34} {m.line[:160]}")
    return 0

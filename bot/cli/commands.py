"""What the CLI's runtime commands do (runs, approvals, serve, eval, runbooks, db, sim), over
the runtime from `wiring` (the CLI only parses arguments).

Importing this module loads the engine (LangGraph), so `bot.cli.main` imports it only in the branches
that need it; the incident reads and human verbs live in `bot.cli.listings` and
`bot.cli.incident_verbs`, which never do. Every command prints with `bot.cli.terminal`; `--json`
variants print machine-readable output.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bot.cli import journeys
from bot.config import Settings
from bot.diagnosis.evidence import EvidenceReport
from bot.engine.catalog import validate_files
from bot.engine.compiling import render_mermaid
from bot.engine.running import RunOutcome
from bot.errors import UserInputError
from bot.cli.terminal import Terminal
from bot.wiring.runtime import load_catalogs, open_runtime, simulated
from runbooks import RUNBOOK_DIR
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
    with open_runtime(settings, scenario_path=_decision_scenario(settings, scenario)) as rt:
        run_id = journeys.find_pending_run(rt, ref)
        quiet = Terminal(io.StringIO()) if as_json else term
        outcome = rt.engine.resume(
            run_id, decision=decision, actor=actor, reason=reason, on_step=quiet.step
        )
        journeys.after_run(rt, quiet, outcome)
        incident_id = int(outcome.incident.removeprefix("INC-"))
        journeys.settle_simulated_alert(rt, quiet, incident_id)  # sim mode only
        if as_json:
            term.line(json.dumps(outcome_json(outcome), indent=2, default=str))
    return 0


def _decision_scenario(settings: Settings, given: Path | None) -> Path | None:
    """The scenario an approval continues on: the one given, else the fleet's saved one (sim
    mode only; on a real cluster there is none, and one given is refused by `open_runtime`)."""
    if given is not None or not simulated(settings):
        return given
    from bot.wiring.simulation import saved_scenario

    return saved_scenario(settings)


def cluster_check(settings: Settings, term: Terminal, *, as_json: bool) -> int:
    """`gpu-oncall cluster check`: which permissions the bot needs the configured identity holds
    (SelfSubjectAccessReview per permission). Exit 0 when all are granted, 1 when some are not."""
    from bot.cli.checking import check_cluster, render_check

    report = check_cluster(settings)
    if as_json:
        term.line(json.dumps(report.to_dict(), indent=2))
    else:
        for line in render_check(report):
            term.line(line)
    return 0 if report.ok else 1


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

    from bot.work.scheduler import Jobs
    from bot.serving.app import create_app, serve_forever
    from storage.leader import make_leadership

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
        leadership = make_leadership(settings.storage.url)

        def leader_gauge(leads: bool) -> None:
            app.counters.leader = int(leads)

        jobs = Jobs(
            rt.engine,
            interval_seconds=settings.server.expiry_check_seconds,
            on_expired=refresh,
            take_over=app.workers.take_over,
            takeover_seconds=settings.work.takeover_seconds,
            leadership=leadership,
            on_leadership=leader_gauge,
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
            leadership.release()  # the next replica leads at its next tick
            if socket is not None:
                socket.close()
    return 0


def db_upgrade(settings: Settings, term: Terminal) -> int:
    """`gpu-oncall db upgrade`: migrate the database to this release's schema (creating it when
    empty; a release-0.1.0 SQLite file is upgraded in place), then compute the `/metrics`
    histograms from the incidents if they never were. Safe to run from several replicas."""
    from bot.incidents import figures
    from storage.db import make_engine, redact
    from storage.migrating import upgrade

    db = make_engine(settings.storage.url)
    try:
        before, after = upgrade(db)
        with session_scope(db) as session:
            rebuilt = figures.ensure_built(session)
    finally:
        db.dispose()
    where = redact(settings.storage.url)
    if before == after:
        term.line(f"{where}: already at revision {after} (this release's schema)")
    else:
        term.line(f"{where}: upgraded from revision {before or 'none'} to {after}")
    if rebuilt:
        term.line(f"{where}: /metrics histograms computed from the incidents")
    return 0


def db_current(settings: Settings, term: Terminal) -> int:
    """`gpu-oncall db current`: the database's schema revision and this release's.
    Exit 0 when they match, 1 when the database needs `gpu-oncall db upgrade`."""
    from storage.db import make_engine, redact
    from storage.migrating import current, head

    db = make_engine(settings.storage.url)
    try:
        at, newest = current(db), head()
    finally:
        db.dispose()
    term.line(f"database: {redact(settings.storage.url)}")
    term.line(f"current:  {at or 'none (empty, or made by release 0.1.0)'}")
    term.line(f"head:     {newest} (this release)")
    if at != newest:
        term.line("run `gpu-oncall db upgrade` to migrate")
        return 1
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
    from bot.evaluation.evaluating import evaluate as run_eval
    from bot.evaluation.scoring import render_json, render_table

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
    from bot.wiring.simulation import (
        ExporterApp,
        ExporterServer,
        Fleet,
        exporter_families,
        load_scenario_file,
    )

    loaded = load_scenario_file(scenario)
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
    from bot.diagnosis.evidence.pasting import classify_paste
    from bot.diagnosis.logs import load_log_catalog
    from runbooks import LOG_SIGNATURES_FILE

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(errors="replace")
    except OSError as exc:
        raise UserInputError(f"cannot read log '{source}': {exc.strerror}") from exc
    catalog = load_log_catalog(LOG_SIGNATURES_FILE)
    verdict = classify_paste(
        text, catalog=catalog, source=Path(source).name if source != "-" else "stdin"
    )
    found, report, seen = verdict.classification, verdict.report, verdict.evidence
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
        result: dict[str, Any] = {
            "layer": verdict.layer,
            "signal": verdict.signal,
            "status": seen.status,
            "formats_recognised": sorted({fmt for _, fmt in seen.formats}),
            "not_understood": [line.to_dict() for line in seen.not_understood],
            "xids": list(found.xids),
            "matches": matches,
        }
        if report is not None:  # a tool output was recognised: its verdict decides
            result["evidence"] = report.to_dict()
        term.line(json.dumps(result, indent=2))
        return 0
    if report is not None:
        _print_evidence(term, report)
        return 0
    term.line(f"layer:  {found.layer or 'none (no known signature)'}")
    term.line(f"signal: {found.signal or '-'}")
    term.line(f"status: {seen.status}: {seen.summary}")
    if found.xids:
        term.line(f"XIDs:   {', '.join(str(x) for x in found.xids)}")
    for m in found.matches:
        term.line(f"  {m.line_no:>6}  {m.signature:<34} {m.line[:160]}")
    if seen.not_understood:
        term.line(f"not understood ({len(seen.not_understood)} line(s) shown):")
    for line in seen.not_understood[:5]:
        term.line(f"  {line.cite()}  {line.text.strip()[:140]}")
    return 0


def triage_bundle(term: Terminal, *, path: str, as_json: bool) -> int:
    """One verdict over a directory, tarball or file of tool outputs and logs."""
    from bot.intake.bundles import read_bundle
    from bot.diagnosis.evidence import recognize
    from bot.diagnosis.logs import load_log_catalog
    from runbooks import LOG_SIGNATURES_FILE

    bundle = read_bundle(Path(path))
    report = recognize(bundle.texts, catalog=load_log_catalog(LOG_SIGNATURES_FILE))
    if as_json:
        result = report.to_dict() | {
            "files": [name for name, _ in bundle.texts],
            "notes": bundle.notes,
        }
        term.line(json.dumps(result, indent=2))
        return 0
    _print_evidence(term, report)
    term.line(f"read:     {len(bundle.texts)} file(s)")
    for note in bundle.notes:
        term.line(f"note:     {note}")
    return 0


def _print_evidence(term: Terminal, report: EvidenceReport) -> None:
    """Verdict, culprits, the deciding findings with file:line evidence, then the rest."""
    term.line(f"verdict:  {report.layer.value} (confidence {report.confidence:.2f})")
    term.line(f"culprits: {', '.join(report.culprits) or '-'}")
    term.line(f"summary:  {report.summary}")
    if report.deciding:
        term.line("deciding findings:")
    for finding in report.deciding[:10]:
        term.line(f"  {finding.severity.value:<8} {finding.summary}")
        for line in finding.lines[:4]:
            term.line(f"           {line.cite()}  {line.text.strip()[:140]}")
    others = [f for f in report.findings if f not in report.deciding]
    if others:
        term.line("other findings:")
    for finding in others[:15]:
        where = finding.target.describe() or "-"
        cite = finding.lines[-1].cite() if finding.lines else ""
        extra = " (context)" if finding.context else ""
        term.line(
            f"  {finding.severity.value:<8} {finding.layer.value:<13} {where}: "
            f"{finding.summary[:110]}{extra} [{cite}]"
        )
    formats = sorted({fmt for _, fmt in report.formats})
    term.line(f"formats:  {', '.join(formats) or '-'}")
    term.line(f"status:   {report.status}")

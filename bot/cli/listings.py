"""The CLI's incident reads: `incidents`, `incident INC-N`, `alerts`, `mttr`. Presentation.

These answer while an incident runs, so they import only what they use: the database, the
incident views and the pure renderers; never LangGraph, Slack, Kubernetes or the engine
(tests/cli/test_cli_import_graph.py guards it; bench/cli_startup.py times it).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.clock import SystemClock
from bot.incidents.mttr import DEFINITIONS, compute_figures, format_duration
from bot.incidents.views import EventView, IncidentView, event_views, incident_view

if TYPE_CHECKING:
    from argparse import Namespace

    from sqlalchemy.engine import Engine

    from bot.cli.read_config import ReadConfig
    from bot.cli.terminal import Terminal
    from bot.config import Settings
    from bot.incidents.gpu_hours import GpuHours
    from bot.incidents.mttr_groups import Group
    from bot.intake.routing import AlertRoute

SHOWN_EVENTS = 40
"""Timeline events `incident` prints (the newest); `--json` and `postmortem` give them all."""


LISTED = 50
"""Incidents `incidents` lists (the newest)."""
_NO_FIGURES = {"check": "check (no fault found)", "failed": "failed (no run finished)"}
"""What the MTTR column says for the incident kinds that have no figures."""


def _db(settings: Settings) -> Engine:
    from bot.wiring.database import open_database  # the ORM tables and the /metrics listeners

    return open_database(settings)


def list_incidents(
    settings: Settings, term: Terminal, *, include_resolved: bool, as_json: bool
) -> int:
    """`gpu-oncall incidents [--all]`: newest first, with each one's MTTR (checks marked).

    A database already at this release's schema is read on the database driver alone
    (storage/glance.py: no SQLAlchemy import); any other goes the full way."""
    views = _glance(settings.storage.url, open_only=not include_resolved)
    if views is None:
        from storage import incidents as incident_store
        from storage.db import session_scope

        with session_scope(_db(settings)) as session:
            rows = incident_store.list_incidents(
                session, open_only=not include_resolved, limit=LISTED
            )
            views = [incident_view(row) for row in rows]
    return _print_incidents(term, views, include_resolved=include_resolved, as_json=as_json)


def _print_incidents(
    term: Terminal, views: list[IncidentView], *, include_resolved: bool, as_json: bool
) -> int:
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
        mttr = _NO_FIGURES.get(v.kind, mttr)
        term.line(
            f"{v.ref:<8} {v.state:<18} {v.severity:<9} {v.runbook:<16} {v.target:<16} "
            f"{v.layer or '-':<13} {mttr}"
        )
    return 0


def _glance(url: str, *, open_only: bool) -> list[IncidentView] | None:
    """The listing from storage/glance.py, or None when the full path must answer."""
    from storage import glance

    rows = glance.recent_incidents(url, open_only=open_only, limit=LISTED)
    return None if rows is None else [incident_view(row) for row in rows]


def light_read(args: Namespace, config: ReadConfig, term: Terminal) -> int | None:
    """`incidents`, `incident INC-N`, `mttr` or `alerts` answered from `config` on the database
    driver itself (storage/glance.py), printed as the full path prints them; None when the full
    path must answer (a database not at this release's schema, an unknown incident, a figure
    only the full path computes, an alert no incident took: its reason needs the runbooks)."""
    if args.command == "incidents":
        views = _glance(config.storage_url, open_only=not args.all)
        if views is None:
            return None
        return _print_incidents(term, views, include_resolved=args.all, as_json=args.json)
    if args.command == "incident":
        return _light_incident(config, term, ref=args.incident, as_json=args.json)
    if args.command == "mttr":
        from bot.intake.windows import parse_window

        return _light_mttr(
            config, term, window=parse_window(args.since), label=args.since, by=args.by,
            as_json=args.json,
        )
    if args.command == "alerts" and not args.unrouted:
        return _light_alerts(config, term, limit=max(args.limit, 1), as_json=args.json)
    return None


def _light_alerts(config: ReadConfig, term: Terminal, *, limit: int, as_json: bool) -> int | None:
    """The alerts when each went to an incident; an unrouted one needs its reason, which only
    routing with the runbooks gives (the full path)."""
    from bot.intake.alert_rows import alert_row
    from storage import glance

    stored = glance.recent_alerts(config.storage_url, limit=limit)
    if stored is None or any(row.incident_id is None for row in stored):
        return None
    rows = [alert_row(row, None) for row in stored]
    return _print_alerts(term, rows, unrouted=False, as_json=as_json)


def _light_incident(config: ReadConfig, term: Terminal, *, ref: str, as_json: bool) -> int | None:
    from bot.incidents.gpu_records import gpu_hours_of
    from storage import glance

    now = SystemClock().now()
    record = glance.incident_record(config.storage_url, ref)
    if record is None:
        return None
    view = incident_view(record.incident)
    events = event_views(record.events)
    cost = gpu_hours_of(record.incident, record.actions, record.events, now=now)
    return _print_incident(
        term, view, events, cost, url=config.incident_url(view.ref), as_json=as_json
    )


def _light_mttr(
    config: ReadConfig, term: Terminal, *, window: timedelta, label: str, by: str, as_json: bool
) -> int | None:
    from bot.incidents.mttr_groups import summarize
    from storage import glance

    until = SystemClock().now()
    since = until - window
    rows = glance.resolved_incidents(config.storage_url, since=since)
    if rows is None or any(row.gpu_hours_lost is None for row in rows):
        return None  # a figure stored before GPU-hours were: the full path computes it
    costs = {row.id: row.gpu_hours_lost for row in rows}
    groups = summarize([incident_view(row) for row in rows], by=by, gpu_hours=costs)
    return _print_mttr(term, groups, since=since, until=until, label=label, by=by, as_json=as_json)


def show_incident(settings: Settings, term: Terminal, *, ref: str, as_json: bool) -> int:
    """`gpu-oncall incident INC-N`: header, timestamps, MTTx with formulas, GPU-hours, and the
    timeline with each event's number (what `pin` takes) and a mark on pinned ones."""
    from bot.incidents.costing import read_gpu_hours
    from bot.incidents.reporting import read_incident
    from storage import incidents as incident_store
    from storage.db import session_scope

    now = SystemClock().now()
    db = _db(settings)
    with session_scope(db) as session:
        row = read_incident(session, ref)
        view = incident_view(row)
        events = event_views(incident_store.list_events(session, row.id or 0))
        cost = read_gpu_hours(session, row, now=now)
    url = settings.pages.incident_url(view.ref)
    return _print_incident(term, view, events, cost, url=url, as_json=as_json)


def _print_incident(
    term: Terminal,
    view: IncidentView,
    events: list[EventView],
    cost: GpuHours,
    *,
    url: str | None,
    as_json: bool,
) -> int:
    from bot.incidents.gpu_hours import render_gpu_hours

    if as_json:
        data = {
            "incident": view.to_dict(),
            "page": url,
            "figures": view.figures().as_seconds(),
            "gpu_hours": cost.to_dict(),
            "timeline": [e.to_dict() for e in events],
        }
        term.line(json.dumps(data, indent=2, default=str))
        return 0
    for line in _header(view):
        term.line(line)
    if url is not None:
        term.line(f"page: {url}")
    for line in render_gpu_hours(cost):
        term.line(line)
    for line in _timeline(events):
        term.line(line)
    return 0


def _header(view: IncidentView) -> list[str]:
    kind = f" — {_NO_FIGURES[view.kind]}, no MTTR" if view.kind in _NO_FIGURES else ""
    lines = [
        f"{view.ref}  {view.title}",
        f"state {view.state} · severity {view.severity} · runbook {view.runbook} · "
        f"target {view.target} · layer {view.layer or '-'}{kind}",
    ]
    if view.culprits:
        lines.append(f"culprits: {', '.join(view.culprits)}")
    source = {"human": f"set by {view.fired_at_corrected_by}", "alert": "from the alert"}
    for name, at in view.timestamps().items():
        shown = f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "-"
        note = ""
        if name == "fired_at":
            note = f"  ({source.get(view.fired_at_source or '', 'nobody said when')})"
        if name == "acknowledged_at" and view.acknowledged_by:
            note = f"  (by {view.acknowledged_by})"
        lines.append(f"  {name:<16} {shown}{note}")
    figures = view.figures()
    for d in DEFINITIONS:
        shown = format_duration(getattr(figures, d.name))
        lines.append(f"  {d.label:<18} {shown:>10}  = {d.formula}")
    return lines


def _timeline(events: list[EventView]) -> list[str]:
    shown = events[-SHOWN_EVENTS:]
    lines = [f"timeline ({len(events)} events; * pinned; `gpu-oncall pin INC-N #id`):"]
    if len(shown) < len(events):
        lines.append(f"  ... {len(events) - len(shown)} earlier events (--json for all)")
    for e in shown:
        mark = "*" if e.pinned else " "
        lines.append(
            f" {mark}#{e.id or '-':<5} {e.at:%H:%M:%S} {e.kind:<22} {e.actor:<14} {e.summary}"
        )
    return lines


def list_alerts(
    settings: Settings, term: Terminal, *, unrouted: bool, limit: int, as_json: bool
) -> int:
    """`gpu-oncall alerts [--unrouted]`: received alerts, newest first; unrouted ones with the
    reason no runbook took them (routed again with today's runbooks)."""
    from bot.intake.listing import alert_rows
    from storage.db import session_scope

    def routes() -> dict[str, AlertRoute]:
        from bot.actions.registry import default_registry
        from bot.engine.catalog import load_catalog
        from integrations.signals import load_signal_catalog
        from runbooks import RUNBOOK_DIR, SIGNALS_FILE

        catalog = load_catalog(
            [RUNBOOK_DIR, *settings.runbook_dirs],
            signals=load_signal_catalog(SIGNALS_FILE).names(),
            actions=default_registry().names(),
        )
        return catalog.alert_routes()

    db = _db(settings)
    with session_scope(db) as session:  # the runbooks are read only for an unrouted alert
        rows = alert_rows(session, routes=routes, unrouted=unrouted, limit=max(limit, 1))
    return _print_alerts(term, rows, unrouted=unrouted, as_json=as_json)


def _print_alerts(
    term: Terminal, rows: list[dict[str, Any]], *, unrouted: bool, as_json: bool
) -> int:
    if as_json:
        term.plain(json.dumps(rows, indent=2, default=str))
        return 0
    if not rows:
        term.plain("No unrouted alerts." if unrouted else "No alerts received.")
        return 0
    term.plain(f"{'RECEIVED':<20} {'STATUS':<9} {'ALERT':<24} {'INCIDENT':<9} LABELS / REASON")
    for row in rows:
        detail = row["reason"] or " ".join(f"{k}={v}" for k, v in row["labels"].items())
        term.plain(
            f"{row['received_at']:%Y-%m-%d %H:%M:%S} {row['status']:<9} {row['alertname']:<24} "
            f"{row['incident'] or '-':<9} {detail}"
        )
    return 0


def mttr(
    settings: Settings,
    term: Terminal,
    *,
    window: timedelta,
    label: str,
    by: str,
    as_json: bool,
) -> int:
    """`gpu-oncall mttr [--since 7d] [--by runbook|layer|week] [--json]`: p50/p90 of each
    figure and the GPU-hours lost, over the incidents resolved in the window."""
    from bot.incidents.reporting import read_mttr_groups
    from storage.db import session_scope

    until = SystemClock().now()
    since = until - window
    db = _db(settings)
    with session_scope(db) as session:
        groups = read_mttr_groups(session, since=since, until=until, by=by)
    return _print_mttr(term, groups, since=since, until=until, label=label, by=by, as_json=as_json)


def _print_mttr(
    term: Terminal,
    groups: list[Group],
    *,
    since: datetime,
    until: datetime,
    label: str,
    by: str,
    as_json: bool,
) -> int:
    from bot.incidents.mttr_groups import formulas, render_table, to_json

    if as_json:
        term.line(json.dumps(to_json(groups, by=by, since=since, until=until), indent=2))
        return 0
    total = sum(g.incidents for g in groups if g.key != "all")
    if not total:
        term.line(f"No incidents resolved in the last {label}.")
        return 0
    term.line(f"Incidents resolved in the last {label}: {total} (p50 / p90, nearest rank)")
    for line in render_table(groups, by=by):
        term.line(line)
    for line in formulas():
        term.line(f"  {line}")
    term.line("  GPU-hours: see `gpu-oncall incident INC-N` for each incident's formula")
    return 0

"""`gpu-oncall runbooks validate | list | graph`."""

from __future__ import annotations

from pathlib import Path

from bot.cli.terminal import Terminal
from bot.config import Settings
from bot.engine.catalog import validate_files
from bot.wiring.runtime import load_catalogs
from runbooks import RUNBOOK_DIR


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
    from bot.engine.compiling import render_mermaid

    _, _, catalog = load_catalogs(settings)
    term.line(render_mermaid(catalog.get(name)).rstrip("\n"))
    return 0

def _catalogs_without_runbooks(settings: Settings) -> tuple[list[str], list[str], None]:
    from bot.actions.registry import default_registry
    from integrations.signals import load_signal_catalog
    from runbooks import SIGNALS_FILE

    return load_signal_catalog(SIGNALS_FILE).names(), default_registry().names(), None

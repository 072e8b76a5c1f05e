"""The runbook catalog: every runbook loaded from the shipped directory plus operator
directories, looked up by name, by alert name, or by `/gpu` verb.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from bot.engine.loading import LoadedRunbook, load_runbook_file
from bot.errors import NotFound, RunbookError
from bot.intake.routing import AlertRoute

CATALOG_FILES = {"signals.yaml", "log_signatures.yaml"}


def runbook_files(directories: Iterable[Path]) -> list[Path]:
    """Runbook YAML files in the directories (the signal/log catalogs are not runbooks)."""
    files: list[Path] = []
    for directory in directories:
        if directory.is_file():
            files.append(directory)
            continue
        files.extend(p for p in sorted(directory.glob("*.yaml")) if p.name not in CATALOG_FILES)
    return files


@dataclass(frozen=True)
class RunbookCatalog:
    runbooks: dict[str, LoadedRunbook]

    def names(self) -> list[str]:
        return sorted(self.runbooks)

    def get(self, name: str) -> LoadedRunbook:
        try:
            return self.runbooks[name]
        except KeyError:
            raise NotFound(
                f"unknown runbook '{name}' (runbooks: {', '.join(self.names())})"
            ) from None

    def for_alert(self, alertname: str) -> tuple[LoadedRunbook, str] | None:
        """The runbook triggered by `alertname`, with the label naming its target."""
        for loaded in self.runbooks.values():
            for trigger in loaded.runbook.triggers.alerts:
                if trigger.alertname == alertname:
                    return loaded, trigger.target_label
        return None

    def alert_routes(self) -> dict[str, AlertRoute]:
        """Alert name -> route, for intake (the first runbook naming an alert wins). A route
        for node targets also names the runbook that triages a storm of that alert, if one
        lists it under `triggers.storms`."""
        storms: dict[str, str] = {}
        for loaded in self.runbooks.values():
            for alertname in loaded.runbook.triggers.storms:
                storms.setdefault(alertname, loaded.name)
        routes: dict[str, AlertRoute] = {}
        for loaded in self.runbooks.values():
            target_input = loaded.runbook.target_input or "node"
            spec = loaded.runbook.inputs.get(target_input)
            kind = spec.type if spec else "node"
            for trigger in loaded.runbook.triggers.alerts:
                routes.setdefault(
                    trigger.alertname,
                    AlertRoute(
                        loaded.name,
                        trigger.target_label,
                        target_input,
                        kind,
                        storm_runbook=storms.get(trigger.alertname) if kind == "node" else None,
                    ),
                )
        return routes

    def for_command(self, verb: str) -> LoadedRunbook | None:
        for loaded in self.runbooks.values():
            if verb in loaded.runbook.triggers.commands:
                return loaded
        return None


def load_catalog(
    directories: Iterable[Path], *, signals: Collection[str], actions: Collection[str]
) -> RunbookCatalog:
    """Load every runbook; the first invalid file raises RunbookError."""
    runbooks: dict[str, LoadedRunbook] = {}
    for path in runbook_files(directories):
        loaded = load_runbook_file(path, signals=signals, actions=actions)
        if loaded.name in runbooks:
            raise RunbookError(
                f"runbook name '{loaded.name}' is also used by {runbooks[loaded.name].file}",
                file=str(path),
                field="metadata.name",
            )
        runbooks[loaded.name] = loaded
    return RunbookCatalog(runbooks)


def validate_files(
    directories: Iterable[Path], *, signals: Collection[str], actions: Collection[str]
) -> tuple[list[LoadedRunbook], list[RunbookError]]:
    """Load every runbook, collecting every error instead of stopping at the first."""
    loaded: list[LoadedRunbook] = []
    errors: list[RunbookError] = []
    for path in runbook_files(directories):
        try:
            loaded.append(load_runbook_file(path, signals=signals, actions=actions))
        except RunbookError as exc:
            errors.append(exc)
    return loaded, errors

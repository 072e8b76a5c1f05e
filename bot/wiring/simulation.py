"""Sim mode: the simulated fleet a scenario builds, its saved state, and the alert it settles.

The only module of `bot` that imports `simulator` (an import-linter contract; `eval`,
its scoring and the server's `/sim/metrics` mount are the listed exceptions). `bot.wiring.runtime`
imports it only when a port is `sim`, so a process pointed at a real cluster and a real
Prometheus never loads the simulator. The fleet's state (scenario, t0, simulated now, journal of
writes) is written through to a file beside the database after every write, atomically, so a
process killed mid-run loses no cluster write and the next process continues on the same fleet.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from bot.clock import Clock, SimulatedClock, SystemClock
from bot.config import Settings
from bot.errors import UserInputError
from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.intake.routing import AlertRoute
from integrations.cluster import (
    ClusterEvent,
    DrainReport,
    JobRun,
    NodeCount,
    NodeInfo,
    NodeSample,
    Outcome,
    Permission,
    PodInfo,
    RemediationPause,
)
from integrations.errors import IntegrationError
from integrations.signals import SignalCatalog
from simulator.cluster import SimCluster
from simulator.exporter import ExporterApp, ExporterServer, exporter_families
from simulator.fleet import Fleet
from simulator.scenarios import SCENARIO_DIR, Scenario, load_scenario
from simulator.telemetry import SimTelemetry
from storage.db import session_scope, sqlite_path

__all__ = [
    "DEFAULT_SCENARIO",
    "ExporterApp",
    "ExporterServer",
    "Fleet",
    "Scenario",
    "SimTelemetry",
    "Simulation",
    "exporter_families",
    "load_scenario_file",
    "open_simulation",
]

DEFAULT_SCENARIO = Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml"


@dataclass
class Simulation:
    """One simulated fleet, its scenario, and where its state is written through."""

    scenario: Scenario
    scenario_path: Path
    fleet: Fleet
    clock: Clock
    state_file: Path | None

    def save(self) -> None:
        """Persist the fleet's state now: temp file in the same directory, then os.replace,
        so a reader (or a process killed mid-write) sees the old state or the new, never half."""
        if self.state_file is None:
            return
        data = {
            "scenario": self.scenario.metadata.name,
            "scenario_path": str(self.scenario_path),
            "t0": self.fleet.t0.isoformat(),
            "now": self.clock.now().isoformat(),
            "fleet": self.fleet.export_state(),
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".sim-state.")
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data, indent=2))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.state_file)

    def fault_start(self) -> datetime:
        """When the scenario's first fault began (the simulated alert's `startsAt`)."""
        starts = [self.fleet.t0 + fault.start for fault in self.scenario.faults]
        return min(starts) if starts else self.clock.now()


def load_scenario_file(path: Path) -> Scenario:
    """A scenario file, its errors (file and field) as one line for the user."""
    try:
        return load_scenario(path)
    except IntegrationError as exc:
        raise UserInputError(str(exc)) from exc


def open_simulation(
    settings: Settings,
    *,
    scenario_path: Path | None,
    scenario: Scenario | None = None,
    fresh: bool = False,
) -> Simulation:
    """Build the fleet of `scenario` (or the file at `scenario_path`, `sim.scenario`, the
    shipped ECC storm), continuing from the saved state unless `fresh`."""
    path = scenario_path or settings.sim.scenario or DEFAULT_SCENARIO
    if scenario is None:
        scenario = load_scenario_file(Path(path))
    state_file = sim_state_file(settings)
    saved = {} if fresh else _read_state(state_file, scenario)
    clock = _clock(settings, saved)
    stored_t0 = saved.get("t0")
    t0 = datetime.fromisoformat(str(stored_t0)) if stored_t0 else clock.now()
    fleet = Fleet.from_scenario(scenario, now=clock.now, t0=t0)
    if saved:
        fleet.restore_state(saved.get("fleet") or {})
    return Simulation(scenario, Path(path), fleet, clock, state_file)


def sim_state_file(settings: Settings) -> Path | None:
    """The state file beside a SQLite database (None for other databases: nothing persists)."""
    path = sqlite_path(settings.storage.url)
    return path.with_name(path.stem + ".sim-state.json") if path else None


def saved_scenario(settings: Settings) -> Path | None:
    """The scenario the simulated fleet was last running (so an approval continues on it)."""
    path = sim_state_file(settings)
    if path is None or not path.exists():
        return None
    stored = json.loads(path.read_text()).get("scenario_path")
    return Path(stored) if stored else None


def sim_telemetry(
    fleet: Fleet, signals: SignalCatalog, *, host_labels: Mapping[str, str]
) -> SimTelemetry:
    return SimTelemetry(fleet, signals, host_labels=dict(host_labels))


class WriteThroughCluster:
    """SimCluster whose every write is followed by `Simulation.save()`: the write-through
    that makes a SIGKILL lose nothing the fleet journaled."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.inner = SimCluster(sim.fleet)

    def nodes(
        self,
        names: Collection[str] | None = None,
        *,
        labels: Mapping[str, str | None] | None = None,
    ) -> list[NodeInfo]:
        return self.inner.nodes(names, labels=labels)

    def first_nodes(self, labels: Mapping[str, str | None], *, limit: int) -> NodeSample:
        return self.inner.first_nodes(labels, limit=limit)

    def count_nodes(self, labels: Mapping[str, str | None]) -> NodeCount:
        return self.inner.count_nodes(labels)

    def pods_on(self, node: str) -> list[PodInfo]:
        return self.inner.pods_on(node)

    def events(self, node: str, *, since: datetime) -> list[ClusterEvent]:
        return self.inner.events(node, since=since)

    def pod_logs(
        self,
        pod: str,
        namespace: str,
        *,
        tail_lines: int = 500,
        container: str | None = None,
        since: timedelta | None = None,
    ) -> str:
        return self.inner.pod_logs(
            pod, namespace, tail_lines=tail_lines, container=container, since=since
        )

    def node_logs(self, node: str, *, tail_lines: int = 500) -> str:
        return self.inner.node_logs(node, tail_lines=tail_lines)

    def check_permissions(self, needed: Collection[Permission]) -> list[Permission]:
        return self.inner.check_permissions(needed)

    def remediation_pauses(self, node: NodeInfo) -> list[RemediationPause]:
        return self.inner.remediation_pauses(node)

    def cordon(self, node: str) -> Outcome:
        return self._saved(self.inner.cordon(node))

    def uncordon(self, node: str) -> Outcome:
        return self._saved(self.inner.uncordon(node))

    def drain(self, node: str, *, grace: timedelta) -> DrainReport:
        report = self.inner.drain(node, grace=grace)
        self.sim.save()
        return report

    def taint(self, node: str, *, key: str, value: str = "", effect: str = "NoSchedule") -> Outcome:
        return self._saved(self.inner.taint(node, key=key, value=value, effect=effect))

    def untaint(self, node: str, *, key: str, effect: str = "NoSchedule") -> Outcome:
        return self._saved(self.inner.untaint(node, key=key, effect=effect))

    def delete_pod(self, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
        return self._saved(self.inner.delete_pod(pod, namespace, grace=grace))

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> Outcome:
        return self._saved(self.inner.annotate(node, annotations))

    def label(self, node: str, labels: Mapping[str, str | None]) -> Outcome:
        return self._saved(self.inner.label(node, labels))

    def create_job(self, manifest: Mapping[str, Any]) -> JobRun:
        run = self.inner.create_job(manifest)
        self.sim.save()
        return run

    def read_job(self, name: str, namespace: str) -> JobRun:
        return self.inner.read_job(name, namespace)

    def job_logs(self, name: str, namespace: str, *, tail_lines: int = 20) -> str:
        return self.inner.job_logs(name, namespace, tail_lines=tail_lines)

    def _saved(self, outcome: Outcome) -> Outcome:
        self.sim.save()  # the fleet journals every write, a no-op one too
        return outcome


def settle_alert(
    sim: Simulation, *, db: Engine, routes: Mapping[str, AlertRoute], now: datetime
) -> str | None:
    """Play Alertmanager's part once a fix is verified: the scenario's alert resolves.

    On the simulated fleet nobody else evaluates the alert rule; after a verified mitigation
    its condition no longer holds, so the resolved notification is sent, as Alertmanager would.
    Returns the alert's name (None when the scenario has no alert trigger).
    """
    trigger = sim.scenario.trigger.alert
    if trigger is None:
        return None
    body = simulated_webhook(
        "resolved",
        trigger.alertname,
        dict(trigger.labels),
        starts_at=sim.fault_start(),
        ends_at=now,
    )
    with session_scope(db) as session:
        receive_webhook(session, parse_webhook(body), routes=routes, at=now)
    return trigger.alertname


def simulated_webhook(
    status: str,
    alertname: str,
    labels: dict[str, str],
    *,
    starts_at: datetime,
    ends_at: datetime | None,
) -> dict[str, Any]:
    """An Alertmanager v4 body for the scenario's alert, as Alertmanager would send it."""
    target = next(iter(labels.values()), "")
    labels = {"alertname": alertname, **labels, "severity": labels.get("severity", "critical")}
    fingerprint = hashlib.sha256(json.dumps(sorted(labels.items())).encode()).hexdigest()[:16]
    alert = {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{alertname} on {target}"},
        "startsAt": starts_at.isoformat(),
        "endsAt": ends_at.isoformat() if ends_at else "0001-01-01T00:00:00Z",
        "fingerprint": fingerprint,
    }
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}"}}',
        "status": status,
        "receiver": "gpu-oncall",
        "groupLabels": {"alertname": alertname},
        "commonLabels": labels,
        "alerts": [alert],
    }


def _clock(settings: Settings, saved: Mapping[str, Any]) -> Clock:
    """Simulated time on the simulated fleet. Wall-clock time with a real Prometheus: its
    samples exist only once their moment has come, so a verification window must really wait."""
    if settings.telemetry == "prometheus":
        return SystemClock()
    real = datetime.now(UTC)  # never behind another process's clock on the same database
    stored = saved.get("now")
    return SimulatedClock(max(real, datetime.fromisoformat(str(stored))) if stored else real)


def _read_state(state_file: Path | None, scenario: Scenario) -> dict[str, Any]:
    if state_file is None or not state_file.exists():
        return {}
    data = json.loads(state_file.read_text())
    if data.get("scenario") != scenario.metadata.name:
        return {}
    return dict(data)

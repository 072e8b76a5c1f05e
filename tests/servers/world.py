"""Simulated fleets behind a real Prometheus: the harness of the Prometheus-backed tests.

`start_world` serves each fleet's exporter on its own ephemeral port, backfills the fleets'
last 20 minutes (or `history`) into a fresh TSDB (history.py), starts Debian's prometheus
scraping every exporter (one job per fleet, static label `fleet=<name>`, lookback 40 s: see
history.py), and returns once each exporter has been scraped. Tests then read one fleet
through `PrometheusTelemetry(match={"fleet": name})` and the same fleet in-process through
`SimTelemetry`; both see one Fleet object, whose clock is the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from servers.history import LOOKBACK, backfill, fleet_history
from servers.prometheus import PrometheusServer, ScrapeTarget

from bot.clock import SystemClock
from bot.config import Settings, StorageSettings
from bot.engine.running import RunEngine, RunOutcome
from bot.incidents import lifecycle
from bot.wiring.runtime import load_catalogs, open_runtime
from integrations.prometheus import PrometheusEndpoint, PrometheusTelemetry
from integrations.signals import SignalCatalog
from simulator import SCENARIO_DIR, load_scenario
from simulator.cluster import SimCluster
from simulator.exporter import ExporterApp, ExporterServer
from simulator.fleet import Fleet
from simulator.telemetry import SimTelemetry
from integrations.telemetry import Telemetry
from storage.db import session_scope

HISTORY = timedelta(minutes=20)
HISTORY_STEP = timedelta(seconds=30)

EXTRA_READS = 4
"""Reads a run adds to one per signal step: the held-gauge check (`changes()` over the XID
gauge), the detector-liveness read and the evidence snapshot's range reads."""


class _Deferred:
    """Answers through an app set after the server is bound (its port labels the history)."""

    def __init__(self) -> None:
        self.app: Any = None

    def handle(self, path: str) -> Any:
        return self.app.handle(path)


@dataclass
class World:
    fleets: dict[str, Fleet]
    exporters: dict[str, ExporterServer]
    prometheus: PrometheusServer

    def telemetry(self, name: str, catalog: SignalCatalog, **options: Any) -> PrometheusTelemetry:
        """PrometheusTelemetry reading only fleet `name` (no retries: a failure shows at once)."""
        endpoint = PrometheusEndpoint(self.prometheus.url, retries=0, timeout_seconds=10)
        return PrometheusTelemetry(endpoint, catalog, match={"fleet": name}, **options)

    def close(self) -> None:
        self.prometheus.stop()
        for server in self.exporters.values():
            server.close()


def catalog_metrics(catalog: SignalCatalog, signals: Iterable[str] | None = None) -> set[str]:
    """Every metric the signals (default: all) read: the series (`_bucket` for a quantile),
    joined series, and kube-state-metrics' node and pod series that resolve membership."""
    out = {"kube_node_info", "kube_pod_status_phase", "kube_pod_info", "kube_pod_labels"}
    for name in catalog.names() if signals is None else signals:
        spec = catalog.get(name)
        out.add(spec.series_metric)
        out.update(join.metric for join in spec.joins)
    return out


def runbook_signals(runbooks: Iterable[str]) -> set[str]:
    """The signals the named runbooks gather or verify (shipped runbooks)."""
    _, _, catalog = load_catalogs(Settings())
    out: set[str] = set()
    for name in runbooks:
        for step in catalog.get(name).runbook.steps:
            out.update(s for s in (step.signal, step.verify.signal if step.verify else None) if s)
    return out


def start_world(
    workdir: Path,
    fleets: Mapping[str, Fleet],
    *,
    catalog: SignalCatalog,
    signals: Iterable[str] | None = None,
    scrape_interval: str = "1s",
    scrapes: int = 2,
    history: timedelta = HISTORY,
) -> World:
    """Exporters, backfilled history (of the metrics `signals` read; default: every signal's)
    and a Prometheus scraping them; closed by `World.close`."""
    exporters: dict[str, ExporterServer] = {}
    deferred: dict[str, _Deferred] = {}
    histories = []
    for name, fleet in fleets.items():
        deferred[name] = _Deferred()
        server = ExporterServer(deferred[name]).start()
        exporters[name] = server
        labels = {"job": name, "instance": f"127.0.0.1:{server.port}", "fleet": name}
        end = fleet.now()
        past = fleet_history(
            fleet,
            metrics=sorted(catalog_metrics(catalog, signals) & set(fleet.metric_names())),
            start=end - history,
            end=end,
            step=HISTORY_STEP,
            labels=labels,
        )
        histories.append(past)
        deferred[name].app = ExporterApp(fleet)
    backfill(histories, data_dir=workdir / "data", workdir=workdir)
    targets = [ScrapeTarget(n, s.url, {"fleet": n}) for n, s in exporters.items()]
    prometheus = PrometheusServer(
        workdir,
        targets=targets,
        data_dir=workdir / "data",
        lookback=LOOKBACK,
        scrape_interval=scrape_interval,
    ).start()
    world = World(dict(fleets), exporters, prometheus)
    try:
        prometheus.wait_for_scrapes(scrapes)
    except BaseException:
        world.close()
        raise
    return world


def start_scenario_world(
    workdir: Path,
    cases: Iterable[tuple[str, str, Any]],
    *,
    catalog: SignalCatalog,
    history: timedelta = HISTORY,
) -> World:
    """A World over the shipped scenario files named by `cases` ((file, runbook, inputs)), one
    fleet per file (named by its stem), exposing what those runbooks read; live scrapes every
    5 s only keep the backfilled past current."""
    cases = list(cases)
    fleets = {
        Path(name).stem: Fleet(load_scenario(SCENARIO_DIR / name), lambda: datetime.now(UTC))
        for name in sorted({case[0] for case in cases})
    }
    return start_world(
        workdir,
        fleets,
        catalog=catalog,
        signals=runbook_signals({case[1] for case in cases}),
        scrape_interval="5s",
        scrapes=1,
        history=history,
    )


def diagnosis_of(outcome: RunOutcome) -> dict[str, Any]:
    """What two runs must agree on: layer, culprits, missing signals and the checks that fired."""
    verdict = outcome.verdict
    fired = sorted(
        step_id
        for step_id, out in outcome.steps.items()
        if out.get("kind") == "check" and out.get("status") == "fired"
    )
    return {
        "layer": verdict["layer"],
        "culprits": verdict["culprits"],
        "missing_signals": verdict["missing_signals"],
        "fired": fired,
    }


def run_on(
    settings: Settings,
    *,
    fleet: Fleet,
    telemetry: Telemetry,
    runbook: str,
    inputs: Mapping[str, str],
    catalogs: Any = None,
) -> RunOutcome:
    """Run `runbook` to its verdict against `fleet` (cluster reads, logs) and `telemetry`,
    through the real engine on a fresh database; stops at the approval, acting on nothing.
    `catalogs` (from `bot.wiring.runtime.load_catalogs`) saves re-reading the runbooks every run."""
    with open_runtime(settings, scenario=fleet.scenario, fresh=True, catalogs=catalogs) as rt:
        deps = replace(rt.deps, telemetry=telemetry, cluster=SimCluster(fleet), clock=SystemClock())
        engine = RunEngine(
            deps=deps, db=rt.db, checkpointer=rt.engine.checkpointer, catalog=rt.catalog
        )
        loaded = rt.catalog.get(runbook)
        target_input = loaded.runbook.target_input or ""
        now = deps.clock.now()
        with session_scope(rt.db) as session:
            incident, _ = lifecycle.open_or_attach(
                session,
                runbook=runbook,
                target=str(inputs.get(target_input, runbook)),
                target_kind=loaded.runbook.inputs[target_input].type if target_input else "runbook",
                severity="warning",
                title=f"{runbook} (real-server test)",
                fired_at=now,
                detected_at=now,
                actor="test",
            )
            incident_id = int(incident.id or 0)
        return engine.start(loaded, inputs=inputs, incident_id=incident_id, requester="test")


def run_both(
    world: World,
    name: str,
    *,
    catalog: SignalCatalog,
    catalogs: Any,
    workdir: Path,
    runbook: str,
    inputs: Mapping[str, str],
) -> tuple[RunOutcome, RunOutcome, PrometheusTelemetry, SimTelemetry]:
    """The runbook on fleet `name` through SimTelemetry, then through Prometheus (each on its
    own database under `workdir`); returns both outcomes and both telemetry adapters used (each
    counts the backend queries it sent)."""
    fleet = world.fleets[name]
    prometheus = world.telemetry(name, catalog)
    sim = SimTelemetry(fleet, catalog)
    outcomes = [
        run_on(
            Settings(storage=StorageSettings(url=f"sqlite:///{workdir / label}.db")),
            fleet=fleet,
            telemetry=telemetry,
            runbook=runbook,
            inputs=inputs,
            catalogs=catalogs,
        )
        for label, telemetry in (("sim", sim), ("prom", prometheus))
    ]
    return outcomes[0], outcomes[1], prometheus, sim

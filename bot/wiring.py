"""Composition root: Settings -> a ready Runtime (database, checkpointer, catalogs, adapters,
run engine). The only place that decides which adapter serves which port.

In the embedded default the Telemetry and Cluster ports are served by the simulated fleet,
which runs on simulated time (a FakeClock), so a 10-minute verification window passes at once.
The fleet's state (scenario, start time, cordons, drains) is saved beside the database, so a
run approved from a new process continues against the same fleet.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from bot.actions.executing import ActionLedger
from bot.actions.ledger import SqlActionLedger
from bot.actions.policy import Limits, Policy, Risk
from bot.actions.registry import ActionRegistry, default_registry
from bot.clock import Clock, SimulatedClock, SystemClock
from bot.config import Settings
from bot.diagnosis.logs import LogCatalog, load_log_catalog
from bot.engine.catalog import RunbookCatalog, load_catalog
from bot.engine.running import RunEngine
from bot.engine.state import Deps
from bot.errors import UserInputError
from integrations.alertmanager import AlertmanagerSilences, RecordedSilences, Silences
from integrations.errors import IntegrationError
from integrations.signals import SignalCatalog, load_signal_catalog
from integrations.sim.cluster import SimCluster
from integrations.sim.fleet import Fleet
from integrations.sim.scenarios import SCENARIO_DIR, Scenario, load_scenario
from integrations.sim.telemetry import SimTelemetry
from integrations.telemetry import Telemetry
from integrations.tickets import RecordedTickets, Tickets, WebhookTickets
from runbooks import LOG_SIGNATURES_FILE, RUNBOOK_DIR, SIGNALS_FILE
from storage.checkpointer import make_checkpointer
from storage.db import create_schema, make_engine, sqlite_path

if TYPE_CHECKING:
    from integrations.prometheus import PrometheusEndpoint

DEFAULT_SCENARIO = Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml"


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    deps: Deps
    catalog: RunbookCatalog
    engine: RunEngine
    fleet: Fleet
    scenario: Scenario
    db: Engine


def make_policy(settings: Settings) -> Policy:
    p = settings.policy
    return Policy(
        approvers=frozenset(p.approvers),
        two_person_risks=frozenset(Risk(r) for r in p.two_person_risks),
        auto_approve_risks=frozenset(Risk(r) for r in p.auto_approve_risks),
        approval_ttl=timedelta(minutes=p.approval_ttl_minutes),
        dry_run=p.dry_run,
        runbook_approvers={name: frozenset(ids) for name, ids in p.runbook_approvers.items()},
        limits=Limits(
            max_unhealthy=p.max_unhealthy,
            max_gpus_removed=p.max_gpus_removed,
            pool_label=p.pool_label,
        ),
    )


def load_catalogs(settings: Settings) -> tuple[SignalCatalog, ActionRegistry, RunbookCatalog]:
    signals = load_signal_catalog(SIGNALS_FILE)
    actions = default_registry()
    catalog = load_catalog(
        [RUNBOOK_DIR, *settings.runbook_dirs], signals=signals.names(), actions=actions.names()
    )
    return signals, actions, catalog


def make_tickets(settings: Settings) -> Tickets:
    if settings.tickets.webhook_url:
        import httpx

        token = settings.tickets.token.get_secret_value() if settings.tickets.token else None
        client = httpx.Client(timeout=settings.timeouts.http_seconds)
        return WebhookTickets(settings.tickets.webhook_url, client=client, token=token)
    return RecordedTickets()


def make_silences(settings: Settings) -> Silences:
    """Alertmanager silences when `alertmanager.url` is set, else silences kept in memory.

    Silences start at wall-clock time: Alertmanager holds a silence that starts in the future
    as pending, and the simulated clock may run ahead of the wall clock.
    """
    am = settings.alertmanager
    labels = am.silence_labels or list(dict.fromkeys(settings.labels.as_dict().values()))
    if am.url:
        import httpx

        token = am.token.get_secret_value() if am.token else None
        client = httpx.Client(timeout=settings.timeouts.http_seconds)
        return AlertmanagerSilences(
            am.url, client=client, now=SystemClock().now, node_labels=labels, token=token
        )
    return RecordedSilences(node_labels=labels)


@contextmanager
def open_runtime(
    settings: Settings,
    *,
    scenario_path: Path | None = None,
    fresh: bool = False,
    scenario: Scenario | None = None,
    catalogs: tuple[SignalCatalog, ActionRegistry, RunbookCatalog] | None = None,
    log_catalog: LogCatalog | None = None,
) -> Iterator[Runtime]:
    """Everything a command needs, opened in order and closed in reverse.

    `scenario` (already loaded), `catalogs` (from `load_catalogs`) and `log_catalog` let a
    caller that opens many runtimes, such as `gpu-oncall eval`, skip re-reading the same files.
    """
    db = make_engine(settings.storage.url)
    create_schema(db)
    state_file = sim_state_file(settings)
    path = scenario_path or settings.sim.scenario or DEFAULT_SCENARIO
    if scenario is None:
        try:
            scenario = load_scenario(Path(path))
        except IntegrationError as exc:
            raise UserInputError(str(exc)) from exc
    saved = {} if fresh else _read_state(state_file, scenario)
    clock = make_clock(settings, saved)
    fleet = Fleet.from_scenario(scenario, now=clock.now, t0=_t0(saved, clock))
    if saved:
        fleet.restore_state(saved.get("fleet") or {})
    signals, actions, catalog = catalogs or load_catalogs(settings)
    silences = make_silences(settings)
    with make_checkpointer(settings.storage.url) as checkpointer, closing(silences):
        deps = Deps(
            telemetry=make_telemetry(settings, fleet=fleet, signals=signals),
            cluster=SimCluster(fleet),
            clock=clock,
            signals=signals,
            log_catalog=log_catalog or load_log_catalog(LOG_SIGNATURES_FILE),
            actions=actions,
            ledger=_ledger(db),
            policy=make_policy(settings),
            tickets=make_tickets(settings),
            silences=silences,
        )
        engine = RunEngine(deps=deps, db=db, checkpointer=checkpointer, catalog=catalog)
        runtime = Runtime(settings, clock, deps, catalog, engine, fleet, scenario, db)
        try:
            yield runtime
        finally:
            _write_state(state_file, scenario, fleet, clock, path=Path(path))
    db.dispose()


def make_clock(settings: Settings, saved: dict[str, Any]) -> Clock:
    """Simulated time on the simulated fleet. Wall-clock time with a real Prometheus: its
    samples exist only once their moment has come, so a verification window must really wait."""
    if settings.telemetry == "prometheus":
        return SystemClock()
    return SimulatedClock(_start_time(saved))


def make_telemetry(settings: Settings, *, fleet: Fleet, signals: SignalCatalog) -> Telemetry:
    """The Telemetry adapter `settings.telemetry` names (`sim` | `prometheus`)."""
    if settings.telemetry != "prometheus":
        return SimTelemetry(fleet, signals, host_labels=settings.labels.as_dict())
    from integrations.prometheus import PrometheusTelemetry  # requests: only when configured

    p = settings.prometheus
    return PrometheusTelemetry(
        make_prometheus_endpoint(settings),
        signals,
        host_labels=settings.labels.as_dict(),
        workload_labels=settings.workload_labels.as_dict(),
        match=p.match,
        max_workers=p.max_concurrency,
    )


def make_prometheus_endpoint(settings: Settings) -> PrometheusEndpoint:
    """Connection settings for PrometheusTelemetry: secrets unwrapped only here."""
    from integrations.prometheus import PrometheusEndpoint

    p = settings.prometheus
    password = p.basic_auth_password.get_secret_value() if p.basic_auth_password else ""
    return PrometheusEndpoint(
        url=p.url,
        headers=dict(p.headers),
        bearer_token=p.bearer_token.get_secret_value() if p.bearer_token else None,
        basic_auth=(p.basic_auth_user, password) if p.basic_auth_user else None,
        ca_file=str(p.ca_file) if p.ca_file else None,
        insecure_skip_verify=p.insecure_skip_verify,
        timeout_seconds=p.timeout_seconds or settings.timeouts.http_seconds,
        retries=p.retries,
        backoff_seconds=p.backoff_seconds,
    )


def _ledger(db: Engine) -> ActionLedger:
    return SqlActionLedger(db)


def sim_state_file(settings: Settings) -> Path | None:
    path = sqlite_path(settings.storage.url)
    return path.with_name(path.stem + ".sim-state.json") if path else None


def _read_state(state_file: Path | None, scenario: Scenario) -> dict[str, Any]:
    if state_file is None or not state_file.exists():
        return {}
    data = json.loads(state_file.read_text())
    if data.get("scenario") != scenario.metadata.name:
        return {}
    return dict(data)


def _start_time(saved: dict[str, Any]) -> datetime:
    real = datetime.now(UTC).replace(microsecond=0)
    stored = saved.get("now")
    return max(real, datetime.fromisoformat(str(stored))) if stored else real


def _t0(saved: dict[str, Any], clock: Clock) -> datetime:
    stored = saved.get("t0")
    return datetime.fromisoformat(str(stored)) if stored else clock.now()


def _write_state(
    state_file: Path | None, scenario: Scenario, fleet: Fleet, clock: Clock, *, path: Path
) -> None:
    if state_file is None:
        return
    state_file.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "scenario": scenario.metadata.name,
        "scenario_path": str(path),
        "t0": fleet.t0.isoformat(),
        "now": clock.now().isoformat(),
        "fleet": fleet.export_state(),
    }
    state_file.write_text(json.dumps(data, indent=2))

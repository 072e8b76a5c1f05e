"""Composition root: Settings -> a ready Runtime (database, checkpointer, catalogs, adapters,
run engine). The only place that decides which adapter serves which port.

`cluster` (`sim` | `kubernetes`) and `telemetry` (`sim` | `prometheus`) are chosen
independently. While either is `sim`, `bot.wiring.simulation` builds the simulated fleet from a
scenario (on simulated time with simulated telemetry, so a 10-minute verification window passes
at once) and writes its state through to a file beside the database. With neither, no fleet and
no scenario exist and `simulator` is never imported: reads and writes go to the real
cluster and the real Prometheus, on the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from bot.actions.breaker import safety_limits
from bot.actions.coexistence import Markers
from bot.actions.executing import ActionLedger
from bot.actions.guarding import SafetyGuard
from bot.actions.ledger import SqlActionLedger
from bot.actions.policy import Policy, Risk
from bot.actions.registry import default_registry
from bot.actions.types import ActionRegistry
from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.diagnosis.logs import LogCatalog, load_log_catalog
from bot.engine.catalog import RunbookCatalog, load_catalog
from bot.engine.gpu_records import StoredGpuHistory
from bot.engine.leases import LeaseKeeper
from bot.engine.running import RunEngine
from bot.engine.state import Deps, PlanTerms
from bot.errors import UserInputError
from bot.wiring.database import open_database as open_database  # re-exported
from integrations.alertmanager import AlertmanagerSilences, RecordedSilences, Silences
from integrations.cluster import Cluster
from integrations.node_agent import HttpNodeAgent, NodeAgent
from integrations.signals import SignalCatalog, load_signal_catalog
from integrations.telemetry import Telemetry
from integrations.tickets import RecordedTickets, Tickets, WebhookTickets
from runbooks import LOG_SIGNATURES_FILE, RUNBOOK_DIR, SIGNALS_FILE
from storage.checkpointer import make_checkpointer

if TYPE_CHECKING:
    from bot.wiring.simulation import Fleet, Scenario, Simulation
    from integrations.k8s import KubernetesEndpoint, KubernetesTuning
    from integrations.prometheus import PrometheusEndpoint


@dataclass
class Runtime:
    """An open runtime. `fleet`, `scenario` and `sim` are None outside sim mode."""

    settings: Settings
    clock: Clock
    deps: Deps
    catalog: RunbookCatalog
    engine: RunEngine
    fleet: Fleet | None
    scenario: Scenario | None
    db: Engine
    sim: Simulation | None = None


def simulated(settings: Settings) -> bool:
    """Sim mode: a port is served by the simulated fleet, so a fleet (and a scenario) exist."""
    return settings.cluster == "sim" or settings.telemetry == "sim"


def check_no_scenario(settings: Settings, scenario: object) -> None:
    """A scenario outside sim mode is a mistake worth one line, never silently ignored."""
    if scenario is not None and not simulated(settings):
        raise UserInputError(
            "--scenario: the bot is pointed at a real cluster and a real Prometheus "
            f"(GPU_ONCALL_CLUSTER={settings.cluster}, GPU_ONCALL_TELEMETRY={settings.telemetry}); "
            "scenarios run only on the simulated fleet (set either to sim)"
        )


def make_policy(settings: Settings) -> Policy:
    p = settings.policy
    return Policy(
        approvers=frozenset(p.approvers),
        two_person_risks=frozenset(Risk(r) for r in p.two_person_risks),
        auto_approve_risks=frozenset(Risk(r) for r in p.auto_approve_risks),
        approval_ttl=timedelta(minutes=p.approval_ttl_minutes),
        dry_run=p.dry_run,
        runbook_approvers={name: frozenset(ids) for name, ids in p.runbook_approvers.items()},
    )


def load_catalogs(settings: Settings) -> tuple[SignalCatalog, ActionRegistry, RunbookCatalog]:
    signals = load_signal_catalog(SIGNALS_FILE)
    actions = default_registry(
        markers=make_markers(settings),
        agent=make_node_agent(settings),
        agent_queue=settings.agent.ticket_queue,
    )
    catalog = load_catalog(
        [RUNBOOK_DIR, *settings.runbook_dirs], signals=signals.names(), actions=actions.names()
    )
    return signals, actions, catalog


def make_node_agent(settings: Settings) -> NodeAgent | None:
    """The node agent `agent.mode` names: the HTTP agent at `agent.url`, the Kubernetes Job
    agent (its template checked now, so a bad one stops start-up with file and field), or
    None: gpu_reset/reboot open tickets."""
    a = settings.agent
    mode = a.chosen_mode()
    if mode == "none":
        return None
    if mode == "job" and settings.cluster == "slurm":
        from bot.wiring.slurm import make_slurm_node_agent

        return make_slurm_node_agent(settings)
    if mode == "job":
        from integrations.node_jobs import JobNodeAgent, JobTemplateError, load_job_template

        try:
            template = load_job_template(a.job_template)
        except JobTemplateError as exc:
            where = "agent.job_template (GPU_ONCALL_AGENT__JOB_TEMPLATE)"
            raise UserInputError(f"{where}: {exc}") from exc
        try:
            return JobNodeAgent(template, namespace=a.namespace, timeout_seconds=a.timeout_seconds)
        except ValueError as exc:  # InvalidName
            raise UserInputError(f"agent.namespace (GPU_ONCALL_AGENT__NAMESPACE): {exc}") from exc
    if not a.url:
        raise UserInputError("agent.mode is http but agent.url (GPU_ONCALL_AGENT__URL) is not set")
    import httpx

    token = a.token.get_secret_value() if a.token else None
    client = httpx.Client(timeout=a.timeout_seconds)
    return HttpNodeAgent(a.url, client=client, token=token)


def make_markers(settings: Settings) -> Markers:
    """The node annotations and labels the node actions write and respect (coexistence)."""
    k = settings.kubernetes
    return Markers(prefix=k.marker_prefix, protected_label=k.protected_label)


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
    A scenario outside sim mode raises UserInputError before anything is opened.
    """
    check_no_scenario(settings, scenario_path or scenario)
    sim = _open_simulation(settings, scenario_path, scenario=scenario, fresh=fresh)
    clock: Clock = sim.clock if sim is not None else SystemClock()
    fleet = sim.fleet if sim is not None else None
    signals, actions, catalog = catalogs or load_catalogs(settings)
    cluster = make_cluster(settings, sim=sim)
    db = open_database(settings)
    silences = make_silences(settings)
    with (
        make_checkpointer(settings.storage.url) as checkpointer,
        closing(silences),
        ExitStack() as stack,
    ):
        stack.callback(_closer(cluster))
        deps = Deps(
            telemetry=make_telemetry(settings, fleet=fleet, signals=signals),
            cluster=cluster,
            clock=clock,
            signals=signals,
            log_catalog=log_catalog or load_log_catalog(LOG_SIGNATURES_FILE),
            actions=actions,
            ledger=_ledger(db, guard=make_guard(settings, cluster=cluster, clock=clock)),
            policy=make_policy(settings),
            tickets=make_tickets(settings),
            silences=silences,
            history=StoredGpuHistory(db),
            kernel_lookback=timedelta(hours=settings.evidence.kernel_log_lookback_hours),
            pool_label=settings.policy.pool_label,
            plan=PlanTerms(
                deadline=timedelta(minutes=settings.policy.drain_checkpoint_deadline_minutes),
                poll=timedelta(seconds=settings.policy.drain_checkpoint_poll_seconds),
                at_deadline=settings.policy.drain_at_deadline,
            ),
            step_deadline=timedelta(seconds=settings.work.step_deadline_seconds),
            parallel_reads=settings.telemetry == "prometheus",
        )
        leases = LeaseKeeper.configured(db, settings.work)
        engine = RunEngine(
            deps=deps, db=db, checkpointer=checkpointer, catalog=catalog, leases=leases
        )
        scenario_loaded = sim.scenario if sim is not None else None
        runtime = Runtime(settings, clock, deps, catalog, engine, fleet, scenario_loaded, db, sim)
        try:
            yield runtime
        finally:
            if sim is not None:
                sim.save()
    db.dispose()


def _open_simulation(
    settings: Settings, scenario_path: Path | None, *, scenario: Scenario | None, fresh: bool
) -> Simulation | None:
    if not simulated(settings):
        return None
    from bot.wiring.simulation import open_simulation  # the simulator: only in sim mode

    return open_simulation(settings, scenario_path=scenario_path, scenario=scenario, fresh=fresh)


def make_cluster(settings: Settings, *, sim: Simulation | None) -> Cluster:
    """The Cluster adapter `settings.cluster` names (`sim` | `kubernetes` | `slurm`)."""
    if settings.cluster == "sim":
        from bot.wiring.simulation import WriteThroughCluster

        if sim is None:  # simulated() is true whenever cluster is sim
            raise UserInputError("cluster=sim needs the simulated fleet")
        return WriteThroughCluster(sim)
    if settings.cluster == "slurm":
        from bot.wiring.slurm import make_slurm_cluster  # Slurm: only when configured

        return make_slurm_cluster(settings)
    from integrations.k8s import KubernetesCluster  # kubernetes: only when configured

    return KubernetesCluster.from_endpoint(
        make_kubernetes_endpoint(settings), tuning=make_kubernetes_tuning(settings)
    )


def _closer(cluster: Cluster) -> Callable[[], None]:
    """The adapter's `close` (KubernetesCluster's connection pool), or nothing to do."""
    close = getattr(cluster, "close", None)
    return close if callable(close) else (lambda: None)


def make_kubernetes_endpoint(settings: Settings) -> KubernetesEndpoint:
    """Connection settings for KubernetesCluster (in-cluster service account or kubeconfig)."""
    from integrations.k8s import KubernetesEndpoint

    k = settings.kubernetes
    return KubernetesEndpoint(
        kubeconfig=str(k.kubeconfig) if k.kubeconfig else None,
        context=k.context,
        in_cluster=k.in_cluster,
    )


def make_kubernetes_tuning(settings: Settings) -> KubernetesTuning:
    """How KubernetesCluster paces and bounds its requests, carried whole to its transport."""
    from integrations.k8s import KubernetesTuning

    k = settings.kubernetes
    return KubernetesTuning(
        timeout_seconds=k.timeout_seconds or settings.timeouts.http_seconds,
        retries=k.retries,
        backoff_seconds=k.backoff_seconds,
        qps=k.qps,
        burst=k.burst,
    )


def make_telemetry(settings: Settings, *, fleet: Fleet | None, signals: SignalCatalog) -> Telemetry:
    """The Telemetry adapter `settings.telemetry` names (`sim` | `prometheus`)."""
    if settings.telemetry != "prometheus":
        from bot.wiring.simulation import sim_telemetry

        if fleet is None:  # simulated() is true whenever telemetry is sim
            raise UserInputError("telemetry=sim needs the simulated fleet")
        return sim_telemetry(fleet, signals, host_labels=settings.labels.as_dict())
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


def _ledger(db: Engine, *, guard: SafetyGuard) -> ActionLedger:
    return SqlActionLedger(db, guard=guard)


def make_guard(settings: Settings, *, cluster: Cluster, clock: Clock) -> SafetyGuard:
    return SafetyGuard(limits=safety_limits(settings), cluster=cluster, clock=clock)

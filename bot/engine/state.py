"""What a runbook run carries: the graph state (JSON-safe values only, checkpointed) and the
dependencies handed to every node through LangGraph's context (never stored in state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any, TypedDict

from bot.actions.executing import ActionLedger
from bot.actions.policy import Policy
from bot.actions.types import ActionRegistry
from bot.clock import Clock
from bot.diagnosis.history import GpuHistory
from bot.diagnosis.logs import LogCatalog
from bot.engine.reads_ahead import ReadsAhead
from bot.limits import STEP_DEADLINE_SECONDS
from integrations.alertmanager import Silences
from integrations.cluster import Cluster
from integrations.signals import SignalCatalog
from integrations.telemetry import Telemetry
from integrations.tickets import Tickets


def merge_steps(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    """Reducer for `steps`: parallel branches each add their own step's output."""
    return {**left, **right}


class RunState(TypedDict, total=False):
    run_id: str
    runbook: str
    incident: str
    inputs: dict[str, Any]
    target: str
    steps: Annotated[dict[str, Any], merge_steps]


@dataclass(frozen=True)
class PlanTerms:
    """How an approved drain waits for the next checkpoint (bot/engine/deferred.py; settings
    `policy.drain_checkpoint_*` and `policy.drain_at_deadline`)."""

    deadline: timedelta = timedelta(minutes=60)
    """Longest wait for the checkpoint; 0 turns the plan off (an approved drain runs at once)."""
    poll: timedelta = timedelta(seconds=60)
    """How often the checkpoint age is read while the drain waits."""
    at_deadline: str = "ask"
    """`ask`: at the deadline the drain is asked for again; `drain`: it runs."""


@dataclass(frozen=True)
class Deps:
    """Clients and catalogs for one run (LangGraph `context_schema`)."""

    telemetry: Telemetry
    cluster: Cluster
    clock: Clock
    signals: SignalCatalog
    log_catalog: LogCatalog
    actions: ActionRegistry
    ledger: ActionLedger
    policy: Policy
    tickets: Tickets
    silences: Silences | None = None
    """Alertmanager silences for the `silence` action (None: the action is skipped)."""
    history: GpuHistory | None = None
    """Fault history per GPU (None: every fault is treated as the GPU's first)."""
    kernel_lookback: timedelta = timedelta(hours=24)
    """Kernel-log lines older than this (or than the run's window, if longer) are history, not
    a current fault (bot.engine.steps.log_age; setting `evidence.kernel_log_lookback_hours`)."""
    pool_label: str = "nvidia.com/gpu.product"
    """Node label that groups nodes into pools: the impact of losing a node names its pool
    (setting `policy.pool_label`, the same label the safety limits count pools by)."""
    plan: PlanTerms = field(default_factory=PlanTerms)
    """How a drain the impact advises to defer waits for the next checkpoint."""
    step_deadline: timedelta = timedelta(seconds=STEP_DEADLINE_SECONDS)
    """Longest a gather step's outside call is waited for (bot.engine.deadlines; setting
    `work.step_deadline_seconds`)."""
    parallel_reads: bool = True
    """Whether a stage's telemetry reads run concurrently (bot.engine.stages): true for a
    backend across the network, which answers them in parallel; false for one that answers
    with this process's own CPU (the simulated fleet), where threads would only take turns on
    the interpreter with every read's samples alive at once."""
    reads_ahead: ReadsAhead = field(default_factory=ReadsAhead)
    """Fresh runs' first reads, started before their graph ran (bot/engine/reads_ahead.py)."""


def step_context(state: RunState) -> dict[str, Any]:
    """The names expressions and templates can read: inputs, step outputs and built-ins."""
    context: dict[str, Any] = dict(state.get("inputs", {}))
    context.update(state.get("steps", {}))
    context["target"] = state.get("target", "")
    context["run_id"] = state.get("run_id", "")
    context["runbook"] = state.get("runbook", "")
    return context

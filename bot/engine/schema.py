"""The runbook YAML schema (apiVersion gpu-oncall/v1, kind Runbook), validated by pydantic.

A runbook is data: inputs, triggers and steps. Each step has exactly one kind key:
`signal`, `cluster`, `check`, `localize`, `propose`, `approve`, `act` or `verify`.
Cross-references (steps, signals, actions) are checked by `loading.py`, not here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.diagnosis.mechanisms import MECHANISMS, Symptom
from integrations import durations

STEP_ID = r"^[a-z][a-z0-9_]*$"


class StepKind(StrEnum):
    SIGNAL = "signal"
    CLUSTER = "cluster"
    CHECK = "check"
    LOCALIZE = "localize"
    PROPOSE = "propose"
    APPROVE = "approve"
    ACT = "act"
    VERIFY = "verify"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    title: str = ""
    owner: str = ""
    description: str = ""


class AlertTrigger(_Strict):
    alertname: str
    target_label: str
    """The alert label whose value is the runbook's target (e.g. `Hostname`, `job`)."""


class Triggers(_Strict):
    alerts: list[AlertTrigger] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=list)
    """`/gpu` verbs that start this runbook, e.g. `diagnose` for `/gpu diagnose <node>`."""
    storms: list[str] = Field(default_factory=list)
    """Alert names this runbook triages as a storm: when one of them fires for many nodes of
    one domain at once (intake's storm policy), one parent incident is opened and this runbook
    runs once with every member node as its `nodes` input. The alert's own per-node runbook
    still handles it when it fires alone."""


InputType = Literal["node", "nodes", "job", "service", "duration", "string", "number"]


class InputSpec(_Strict):
    type: InputType
    required: bool = False
    default: str | float | None = None
    help: str = ""


ClusterRead = Literal["node", "pods", "events", "node_logs", "pod_logs"]


class Proposal(_Strict):
    action: str
    when: str | None = None
    """CEL condition; the action is proposed only when it holds."""
    target: str | None = None
    """Template for the target; defaults to the runbook's target input."""
    targets: str | None = None
    """Template rendering several targets (comma- or space-separated): one proposal each, e.g.
    `"{{ where.culprit_nodes | join(',') }}"` to cordon every culprit node. Overrides `target`."""
    params: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""

    @model_validator(mode="after")
    def _known_param_values(self) -> Proposal:
        """Params with a fixed set of values: `on_no_requeue` (drain: what happens to a Slurm
        job that does not allow requeue; bot/actions/job_requeue.py)."""
        value = self.params.get("on_no_requeue")
        if value is not None and value not in ("block", "cancel"):
            raise ValueError(
                f"params.on_no_requeue must be block or cancel (found {value!r}): what a drain "
                "does to a job that does not allow requeue"
            )
        return self


class VerifySpec(_Strict):
    signal: str
    expect: str
    """CEL over the fresh signal summary (value (= max), max, min, median, sum, any, count, ...)
    and the run's inputs and earlier step outputs."""
    within: str = "10m"
    interval: str = "1m"
    window: str | None = None
    when: str | None = None
    """CEL condition; verification runs only when it holds (e.g. an action succeeded)."""


class CorrelateSpec(_Strict):
    """Cross-node correlation (bot.diagnosis.correlating): many affected nodes that share a
    domain become one culprit, the domain."""

    sources: list[str] = Field(min_length=1)
    """Steps whose per-node labels are compared: a cluster `node` read (its items' `labels`) or
    a signal with `keep_labels` (its `node_labels`)."""
    domains: dict[str, list[str]]
    """Layer -> labels naming a domain nodes may share, tried in order, e.g.
    `facility: [gpu-oncall.io/rack]`, `node_software: [DCGM_FI_DRIVER_VERSION]`."""
    min_nodes: int = Field(default=3, ge=2)
    min_share: float = Field(default=0.5, gt=0.0, le=1.0)


class LocalizeSpec(_Strict):
    correlate: CorrelateSpec | None = None
    symptom: Symptom | None = None
    """What the run investigates (hang, slowdown, latency, errors, node_lost): only findings
    whose mechanism can produce it may be the verdict (bot.diagnosis.mechanisms)."""


class ApproveSpec(_Strict):
    timeout: str | None = None
    """How long the approval stays open (default from settings)."""


RiskName = Literal["low", "medium", "high"]
DURATION = durations.PATTERN


class AutoApproveRule(_Strict):
    """An action this runbook may carry out without asking, for a bounded number of targets.
    The safety limits still apply when it runs (checked when the action is claimed)."""

    action: str
    max_targets: int = Field(default=1, ge=1)
    """More targets of this action in one run than this go to a person for approval."""


class PolicySpec(_Strict):
    """The runbook's own approval policy; each field left out keeps the settings' default
    (`policy.*`). The approval message names every override."""

    approvers: list[str] | None = None
    """Who may approve (Slack user ids, `cli:<user>`), instead of the settings' approvers."""
    groups: list[str] | None = None
    """Slack user-group ids (`S...`) whose members may approve."""
    approval_risks: list[RiskName] | None = None
    """Risk levels that need a person's approval; the others run without asking."""
    two_person_risks: list[RiskName] | None = None
    """Risk levels where the requester may not approve their own request."""
    auto_approve: list[AutoApproveRule] | None = None
    expiry: str | None = Field(default=None, pattern=DURATION)
    """How long an approval request stays open, e.g. `15m`."""


class Step(_Strict):
    id: str = Field(pattern=STEP_ID)
    title: str = ""
    after: list[str] = Field(default_factory=list)
    with_: dict[str, str] = Field(default_factory=dict, alias="with")

    signal: str | None = None
    cluster: ClusterRead | None = None
    check: str | None = None
    localize: LocalizeSpec | None = None
    propose: list[Proposal] | None = None
    approve: ApproveSpec | None = None
    act: dict[str, Any] | None = None
    verify: VerifySpec | None = None

    # check steps
    layer: str | None = None
    severity: Literal["info", "warning", "critical"] = "warning"
    finding: str | None = None
    culprit: dict[str, str] = Field(default_factory=dict)
    mechanism: str | None = None
    """How this check's fault produces symptoms, a name from bot.diagnosis.mechanisms."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Step:
        kinds = [k.value for k in StepKind if getattr(self, k.value) is not None]
        if len(kinds) != 1:
            found = ", ".join(kinds) if kinds else "none"
            valid = ", ".join(k.value for k in StepKind)
            raise ValueError(f"a step needs exactly one of {valid} (found: {found})")
        if self.kind is StepKind.CHECK and self.layer is None:
            raise ValueError("a check step needs a 'layer'")
        if self.kind is StepKind.CHECK and self.finding is None:
            raise ValueError("a check step needs a 'finding' message")
        if self.mechanism is not None and self.mechanism not in MECHANISMS:
            known = ", ".join(sorted(MECHANISMS))
            raise ValueError(f"unknown mechanism '{self.mechanism}' (known: {known})")
        return self

    @property
    def kind(self) -> StepKind:
        for kind in StepKind:
            if getattr(self, kind.value) is not None:
                return kind
        raise AssertionError("validated step without a kind")


class Runbook(_Strict):
    apiVersion: Literal["gpu-oncall/v1"]
    kind: Literal["Runbook"]
    metadata: Metadata
    triggers: Triggers = Field(default_factory=Triggers)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    policy: PolicySpec | None = None
    steps: list[Step] = Field(min_length=1)

    @property
    def name(self) -> str:
        return self.metadata.name

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    @property
    def target_input(self) -> str | None:
        """The input that names the runbook's target: the first node/nodes/job/service input."""
        for name, spec in self.inputs.items():
            if spec.type in ("node", "nodes", "job", "service"):
                return name
        return None

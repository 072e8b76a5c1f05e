"""SQLModel tables: incidents, their timeline, runbook runs, findings, actions, approvals, alerts,
and the durable work queue.

Unique constraints carry deduplication and idempotency (alert fingerprint+status+startsAt, action
idempotency key, one approval per run step, one open incident per group key), so replicas sharing
one database can never double-create or double-act. Every datetime column is `UTCDateTime`:
naive datetimes are refused on write and values come back timezone-aware UTC on read.
JSON columns hold plain data only (dicts/lists of str, int, float, bool, None).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from storage.columns import UTCDateTime

OPEN_INCIDENT_PREDICATE = "state NOT IN ('resolved', 'failed')"
"""An incident blocks its (runbook, target) group key until it is resolved or has failed: a
failed incident (its run could not start or crashed for good) never swallows the next alert
about the same target, which opens a fresh incident and a fresh run."""


def _at(*, nullable: bool = False, index: bool = False) -> Any:
    """A UTC datetime field (each table needs its own Column object)."""
    column: Column[datetime] = Column(UTCDateTime(), nullable=nullable, index=index)
    return Field(default=None, sa_column=column) if nullable else Field(sa_column=column)


def _json_list() -> Any:
    return Field(default_factory=list, sa_column=Column(JSON, nullable=False))


def _json_dict() -> Any:
    return Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Incident(SQLModel, table=True):
    """One incident per (runbook, target) while it is open; `ref` (INC-42) is its human id."""

    __tablename__ = "incidents"
    __table_args__ = (
        # At most one open incident per group key: a re-firing alert or a second replica
        # attaches to it instead of opening a duplicate.
        Index(
            "uq_incidents_open_group_key",
            "group_key",
            unique=True,
            sqlite_where=text(OPEN_INCIDENT_PREDICATE),
            postgresql_where=text(OPEN_INCIDENT_PREDICATE),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    runbook: str
    target: str
    target_kind: str  # node | job | service
    severity: str
    title: str
    state: str = Field(default="open", index=True)
    group_key: str = Field(index=True)  # runbook + ":" + target
    layer: str | None = None
    confidence: float | None = None
    culprits: list[str] = _json_list()
    fired_at: datetime | None = _at(nullable=True)
    detected_at: datetime | None = _at(nullable=True)
    diagnosed_at: datetime | None = _at(nullable=True)
    acknowledged_at: datetime | None = _at(nullable=True)
    acknowledged_by: str | None = None
    mitigated_at: datetime | None = _at(nullable=True)
    resolved_at: datetime | None = _at(nullable=True)
    fired_at_corrected_by: str | None = None
    fired_at_source: str | None = None  # alert | human (None: nobody said when impact began)
    kind: str = Field(default="incident", sa_column_kwargs={"server_default": "incident"})
    """`incident`, or `check`: a person's diagnosis that found nothing (no MTTR figures)."""
    gpu_hours_lost: float | None = None  # set at resolution (bot/incidents/gpu_hours.py)
    created_at: datetime = _at()

    @property
    def ref(self) -> str:
        """The human id, e.g. `INC-42`."""
        return f"INC-{self.id}"


class TimelineEvent(SQLModel, table=True):
    """One thing that happened to an incident, with its time and who did it."""

    __tablename__ = "timeline_events"

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    at: datetime = _at()
    kind: str
    actor: str  # "bot" | "alertmanager" | Slack user id | "cli:<user>"
    summary: str
    payload: dict[str, Any] = _json_dict()
    pinned: bool = False
    pinned_by: str | None = None  # who last pinned or unpinned it (None: the default by kind)
    pinned_at: datetime | None = _at(nullable=True)
    run_id: str | None = None
    step_id: str | None = None


class RunbookRun(SQLModel, table=True):
    """One execution of a runbook; `id` is also the LangGraph thread_id."""

    __tablename__ = "runbook_runs"

    id: str = Field(primary_key=True)  # uuid4 hex
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    runbook: str
    inputs: dict[str, Any] = _json_dict()
    status: str = "running"  # running | awaiting_approval | completed | failed | rejected
    started_at: datetime = _at()
    finished_at: datetime | None = _at(nullable=True)
    verdict: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    queries: int = 0
    error: str | None = None


class FindingRow(SQLModel, table=True):
    """A finding produced by a check step of a run (see bot.diagnosis.findings.Finding)."""

    __tablename__ = "findings"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runbook_runs.id", index=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    check_id: str
    layer: str
    severity: str
    summary: str
    evidence: list[dict[str, Any]] = _json_list()
    culprit: dict[str, Any] = _json_dict()
    at: datetime = _at()


class ActionRow(SQLModel, table=True):
    """One execution of an action, claimed under a unique idempotency key before it runs."""

    __tablename__ = "actions"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runbook_runs.id", index=True)
    incident_id: int | None = Field(default=None, foreign_key="incidents.id", index=True)
    step_id: str
    action: str
    target: str
    params: dict[str, Any] = _json_dict()
    idempotency_key: str = Field(unique=True)
    status: str = "running"  # running | succeeded | failed | skipped | dry_run | blocked
    outcome: str | None = None  # e.g. changed | already_done | blocked (a safety limit)
    result: dict[str, Any] = _json_dict()
    started_at: datetime = _at()
    finished_at: datetime | None = _at(nullable=True)
    lease_expires_at: datetime | None = _at(nullable=True)


class SafetyBreaker(SQLModel, table=True):
    """The circuit breaker of node removals (storage/safety.py): `open` from `tripped_at`
    until an approver resets it; removals before `reset_at` no longer count towards it."""

    __tablename__ = "safety_breakers"

    name: str = Field(primary_key=True)  # "removals"
    state: str = "closed"  # closed | open
    tripped_at: datetime | None = _at(nullable=True)
    trip_detail: str | None = None
    reset_at: datetime | None = _at(nullable=True)
    reset_by: str | None = None
    reset_reason: str | None = None


class PauseRequest(SQLModel, table=True):
    """A person's request that the bot change nothing in the cluster (`/gpu pause <reason>`,
    medik8s NodeHealthCheck `pauseRequests`); in force until `resumed_at`."""

    __tablename__ = "pause_requests"

    id: int | None = Field(default=None, primary_key=True)
    reason: str
    requested_by: str
    requested_at: datetime = _at()
    resumed_at: datetime | None = _at(nullable=True, index=True)
    resumed_by: str | None = None


class SafetyStorm(SQLModel, table=True):
    """A pool or topology domain where a capacity limit blocked a removal: no new removal
    there until `stormCooldownDuration` after `last_blocked_at`."""

    __tablename__ = "safety_storms"

    scope: str = Field(primary_key=True)  # e.g. "pool nvidia.com/gpu.product=H100"
    started_at: datetime = _at()
    last_blocked_at: datetime = _at()
    detail: str


class ApprovalRow(SQLModel, table=True):
    """A request for a human decision on a run's proposed actions; one per (run, step)."""

    __tablename__ = "approvals"
    __table_args__ = (UniqueConstraint("run_id", "step_id", name="uq_approvals_run_step"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runbook_runs.id", index=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    step_id: str
    state: str = "pending"  # pending | approved | rejected | expired
    requested_at: datetime = _at()
    expires_at: datetime = _at()
    decided_at: datetime | None = _at(nullable=True)
    actor: str | None = None
    reason: str | None = None
    payload: dict[str, Any] = _json_dict()


class ReceivedAlert(SQLModel, table=True):
    """An Alertmanager alert as received; a redelivery of the same one is refused by the DB.

    Every query on this table is index-backed, so intake does not slow down as it grows: the
    unique identity serves redeliveries and lookups by fingerprint (its first column), the
    storm-window index the storm check (alerts of one name received since a time).
    """

    __tablename__ = "received_alerts"
    __table_args__ = (
        UniqueConstraint("fingerprint", "status", "starts_at", name="uq_received_alerts_identity"),
        Index("ix_received_alerts_storm_window", "alertname", "status", "received_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str
    status: str  # firing | resolved
    starts_at: datetime = _at()
    ends_at: datetime | None = _at(nullable=True)
    alertname: str
    labels: dict[str, str] = _json_dict()
    annotations: dict[str, str] = _json_dict()
    received_at: datetime = _at()
    incident_id: int | None = Field(default=None, foreign_key="incidents.id", index=True)
    runbook: str | None = None


class ChatMessage(SQLModel, table=True):
    """Where an incident's live message was posted in chat (Slack channel id + message ts), so a
    restarted bot keeps updating the same message. One row per (channel, ts)."""

    __tablename__ = "chat_messages"
    __table_args__ = (UniqueConstraint("channel", "ts", name="uq_chat_messages_channel_ts"),)

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    run_id: str | None = Field(default=None, index=True)
    channel: str
    ts: str
    kind: str = "triage"
    posted_at: datetime = _at()


class WorkItem(SQLModel, table=True):
    """Work that must happen (a triage run, a decided approval's resumption, a verification
    timer), recorded before it is acknowledged and claimed by one worker under a lease.

    A worker claims a row with a conditional UPDATE that only one claimer can win (`owner` is
    empty or its lease expired); it heartbeats `lease_expires_at` while it works. A row whose
    lease expired (its worker died) is claimed again by the next worker, at most
    `max_attempts` times (storage/work.py). `key` is unique: the same work is recorded once.
    """

    __tablename__ = "work_items"

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(unique=True)  # e.g. triage:<run id>, resume:<run id>:<approval id>
    kind: str  # triage | resume | timer
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    run_id: str = Field(index=True)
    payload: dict[str, Any] = _json_dict()
    state: str = Field(default="pending", index=True)  # pending | done | failed
    due_at: datetime = _at()
    owner: str | None = None
    lease_expires_at: datetime | None = _at(nullable=True)
    attempts: int = 0
    last_error: str | None = None
    created_at: datetime = _at()
    finished_at: datetime | None = _at(nullable=True)


class FigureBucket(SQLModel, table=True):
    """How many incidents have one MTTR figure in one histogram bucket, per runbook, layer and
    severity, and the sum of those figures: `/metrics` renders from these rows alone.

    Maintained in the same transaction as every incident change: just before it commits, the
    difference between the changed incidents' figures before and after it is added
    (`bot/incidents/figures.py`) with one `count = count + excluded.count` upsert in key order,
    so concurrent replicas never lose an increment nor deadlock on these rows.
    `bucket` is the index of the first bound the figure fits under (the number of bounds for
    +Inf); `micros` sums the figures in microseconds, exactly.
    """

    __tablename__ = "figure_buckets"

    figure: str = Field(primary_key=True)  # mttd | mtta | time_to_diagnosis | mttm | mttr
    runbook: str = Field(primary_key=True)
    layer: str = Field(primary_key=True)  # "undiagnosed" until a verdict names one
    severity: str = Field(primary_key=True)
    bucket: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    observations: int = Field(sa_column=Column(BigInteger, nullable=False))
    micros: int = Field(sa_column=Column(BigInteger, nullable=False))


class EvidenceSnapshot(SQLModel, table=True):
    """The key series behind a run's verdict, read from telemetry when the run localized: the
    culprit's signal and a few peers over the incident window plus a margin (storage/snapshots.py).
    A postmortem draws its metric chart from this row, so it renders after the backend has
    forgotten the data. `series` holds `[{"node", "role": culprit|peer, "labels", "points":
    [[unix seconds, value], ...]}]`. One row per (run, signal)."""

    __tablename__ = "evidence_snapshots"
    __table_args__ = (
        UniqueConstraint("run_id", "signal", name="uq_evidence_snapshots_run_signal"),
    )

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    run_id: str
    signal: str
    start: datetime = _at()
    end: datetime = _at()
    step_seconds: float
    onset_at: datetime | None = _at(nullable=True)
    series: list[dict[str, Any]] = _json_list()
    taken_at: datetime = _at()


class GpuHistoryRow(SQLModel, table=True):
    """One fact about one physical GPU, kept across incidents (storage/gpu_history.py): a
    finding that named it (`kind` finding, `what` e.g. `xid 48`) or an action on it (`kind`
    action, `what` e.g. `gpu_reset`). `gpu_key` is the GPU's UUID when known (it follows the
    GPU to another node or slot), else `node/gpu<index>`. One row per (run, GPU, kind, what)."""

    __tablename__ = "gpu_history"
    __table_args__ = (
        UniqueConstraint("run_id", "gpu_key", "kind", "what", name="uq_gpu_history_run_fact"),
        Index("ix_gpu_history_key_at", "gpu_key", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    gpu_key: str
    uuid: str | None = None
    serial: str | None = None
    node: str
    gpu: str | None = None
    kind: str  # finding | action
    what: str
    incident_id: int | None = Field(default=None, foreign_key="incidents.id", index=True)
    run_id: str
    detail: str = ""
    at: datetime = _at()


class ActionItemRow(SQLModel, table=True):
    """A postmortem action item a person recorded (`gpu-oncall action`, `/gpu action`): what to
    do, who owns it and by when. Drafts drawn from the record are not stored; these are."""

    __tablename__ = "action_items"

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    text: str
    owner: str
    due: date | None = None
    created_by: str
    created_at: datetime = _at()


class ProseSectionRow(SQLModel, table=True):
    """A postmortem section a person wrote (summary, impact, root cause, went well / badly):
    it replaces the drafted text and nothing the bot drafts later overwrites it."""

    __tablename__ = "postmortem_prose"
    __table_args__ = (UniqueConstraint("incident_id", "section", name="uq_postmortem_prose"),)

    id: int | None = Field(default=None, primary_key=True)
    incident_id: int = Field(foreign_key="incidents.id", index=True)
    section: str
    text: str
    written_by: str
    written_at: datetime = _at()

"""Settings (pydantic-settings): the only reader of the environment and `.env`.

Variables are `GPU_ONCALL_<GROUP>__<FIELD>`, e.g. `GPU_ONCALL_STORAGE__URL`,
`GPU_ONCALL_POLICY__APPROVERS='["U123","cli:alice"]'`. Each field's docstring is its documentation
(docs/configuration.md lists them). Secrets are SecretStr and never appear in reprs or logs.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class StorageSettings(BaseModel):
    url: str = "sqlite:///.gpu-oncall/oncall.db"
    """SQLAlchemy URL of the database. SQLite by default (a file; nothing to install);
    `postgresql+psycopg://...` for production. The LangGraph checkpointer lives beside it."""


class LabelSettings(BaseModel):
    dcgm: str = "Hostname"
    """Host label on dcgm-exporter series: `Hostname` in released exporters, `hostname` newer."""
    node_exporter: str = "instance"
    """Host label on node_exporter series (relabel `instance` to the node name)."""
    kube_state_metrics: str = "node"
    """Node label on kube-state-metrics series."""
    vllm: str = "node"
    """Node label on vLLM series (added by your scrape config)."""
    job: str = "node"
    """Node label on training-job metrics."""

    def as_dict(self) -> dict[str, str]:
        return self.model_dump()


class PolicySettings(BaseModel):
    approvers: list[str] = Field(default_factory=list)
    """Who may approve (Slack user ids, `cli:<user>`). Empty: anyone who can reach the bot."""
    two_person_risks: list[str] = Field(default_factory=lambda: ["high"])
    """Risk levels where the requester cannot approve their own request."""
    auto_approve_risks: list[str] = Field(default_factory=list)
    """Risk levels that run without approval. None by default."""
    approval_ttl_minutes: float = 30.0
    """How long an approval request stays open; an expired one takes the rejected branch."""
    dry_run: bool = False
    """Global dry-run: actions report what they would do and change nothing."""


class TicketSettings(BaseModel):
    webhook_url: str | None = None
    """Where `open_ticket` POSTs tickets. Unset: tickets are recorded on the incident timeline."""
    token: SecretStr | None = None
    """Bearer token for the ticket webhook."""


class TimeoutSettings(BaseModel):
    http_seconds: float = 5.0
    """Timeout for every outbound HTTP call (ticket webhook, Prometheus, Alertmanager)."""


class SimSettings(BaseModel):
    scenario: Path | None = None
    """Scenario file for the simulated fleet (the embedded default). Unset: the shipped ECC demo."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="GPU_ONCALL_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    storage: StorageSettings = Field(default_factory=StorageSettings)
    labels: LabelSettings = Field(default_factory=LabelSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    tickets: TicketSettings = Field(default_factory=TicketSettings)
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    sim: SimSettings = Field(default_factory=SimSettings)
    runbook_dirs: list[Path] = Field(default_factory=list)
    """Extra directories of operator runbooks, loaded after the shipped ones."""
    telemetry: str = "sim"
    """Telemetry backend: `sim` (the in-process simulated fleet)."""
    cluster: str = "sim"
    """Cluster backend: `sim` (the in-process simulated fleet)."""

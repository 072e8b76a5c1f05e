"""Settings (pydantic-settings): the only reader of the environment and `.env`.

Variables are `GPU_ONCALL_<GROUP>__<FIELD>`, e.g. `GPU_ONCALL_STORAGE__URL`,
`GPU_ONCALL_POLICY__APPROVERS='["U123","cli:alice"]'`. Each field's docstring is its documentation
(docs/configuration.md lists them). Secrets are SecretStr and never appear in reprs or logs.
"""

from __future__ import annotations

import ast
import difflib
import json
import sys
import typing
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.limits import STEP_DEADLINE_SECONDS
from storage.defaults import DEFAULT_DATABASE_URL


class SettingsGroup(BaseModel):
    """Base of every settings group: each field's attribute docstring is its documentation,
    which `render_settings_doc` turns into docs/configuration.md. (Read from this file's source
    by `attribute_docs` only when the doc is rendered: pydantic's `use_attribute_docstrings`
    re-reads the source at every import, half the cost of importing this module, which every
    CLI command pays; bench/cli_startup.py.)"""

    model_config = ConfigDict()


class StorageSettings(SettingsGroup):
    url: str = DEFAULT_DATABASE_URL
    """SQLAlchemy URL of the database. SQLite by default (a file; nothing to install);
    `postgresql+psycopg://...` for production. The LangGraph checkpointer lives beside it."""
    migrate: bool = True
    """Bring the schema up to date when the bot opens the database (creating it when empty).
    Set false where an init container or a job runs `gpu-oncall db upgrade` first: the bot then
    refuses a database whose schema is not this release's (docs/deployment.md)."""
    pool_size: int = Field(default=10, ge=1)
    """PostgreSQL: connections kept open per process (and as many again for the checkpointer)."""
    max_overflow: int = Field(default=10, ge=0)
    """PostgreSQL: connections opened beyond `pool_size` under load, closed when idle."""


class LabelSettings(SettingsGroup):
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


class WorkloadLabelSettings(SettingsGroup):
    job: str = "job"
    """Label naming the training job on job metrics. Prometheus renames a scraped `job` label to
    `exported_job` unless the scrape config sets `honor_labels: true`; set this to match."""
    vllm: str = "service"
    """Label naming the inference service on vLLM series (added by your scrape config)."""
    kube_state_metrics: str = "label_app_kubernetes_io_name"
    """Pod label naming a pod's workload, as kube-state-metrics exports it in `kube_pod_labels`
    (`--metric-labels-allowlist=pods=[app.kubernetes.io/name]`)."""

    def as_dict(self) -> dict[str, str]:
        return self.model_dump()


class PolicySettings(SettingsGroup):
    approvers: list[str] = Field(default_factory=list)
    """Who may approve: Slack user ids (`U...`), Slack user-group ids (`S...`, members resolved
    with `usergroups.users.list`) and `cli:<user>`. Empty: anyone who can reach the bot."""
    runbook_approvers: dict[str, list[str]] = Field(default_factory=dict)
    """Runbook name -> its own approvers (same forms as `approvers`), used instead of them."""
    two_person_risks: list[str] = Field(default_factory=lambda: ["high"])
    """Risk levels where the requester cannot approve their own request."""
    auto_approve_risks: list[str] = Field(default_factory=list)
    """Risk levels that run without approval. None by default."""
    approval_ttl_minutes: float = 30.0
    """How long an approval request stays open; an expired one takes the rejected branch."""
    dry_run: bool = False
    """Global dry-run: actions report what they would do and change nothing."""
    max_unhealthy: str = Field(default="25%", pattern=r"^\d+%?$")
    """Blast radius: most nodes of one pool that may be out of service (cordoned or NotReady)
    after an action, as a count (`4`) or a share (`25%`, rounded up). `100%` turns it off."""
    max_gpus_removed: str = Field(default="25%", pattern=r"^\d+%?$")
    """Blast radius: most GPUs of one pool on out-of-service nodes after an action."""
    pool_label: str = "nvidia.com/gpu.product"
    """Node label that groups nodes into pools for the blast-radius limits."""
    drain_checkpoint_deadline_minutes: float = Field(default=60.0, ge=0)
    """When the impact advises "cordon and let it checkpoint", an approved drain waits (the
    node cordoned at once) for the next checkpoint of the node's jobs, at most this long; a
    drain proposal's `checkpoint_deadline` param overrides it. 0: approved drains run at once."""
    drain_checkpoint_poll_seconds: float = Field(default=60.0, gt=0)
    """How often a waiting drain reads its jobs' checkpoint age (`job.checkpoint_age`)."""
    drain_at_deadline: Literal["ask", "drain"] = "ask"
    """What a waiting drain does at its deadline with no checkpoint: ask again, or drain."""


class SafetySettings(SettingsGroup):
    """The safety limits checked immediately before every action runs (docs/safety.md). The
    pool limits are `policy.max_unhealthy`, `policy.max_gpus_removed` and `policy.pool_label`;
    the protected-node label is `kubernetes.protected_label`."""

    domain_labels: list[str] = Field(
        default_factory=lambda: [
            "gpu-oncall.io/rack",
            "gpu-oncall.io/leaf-switch",
            "nvidia.com/gpu.clique",
        ]
    )
    """Node labels naming a topology domain (a rack, a leaf switch, an NVLink domain such as
    GPU Feature Discovery's `nvidia.com/gpu.clique`, or `topology.kubernetes.io/...`). Each
    domain gets its own `domain_max_gpus_removed`. A node without the label is in no domain."""
    domain_max_gpus_removed: str = Field(default="50%", pattern=r"^\d+%?$")
    """maxGPUsRemoved per topology domain: most GPUs of one domain on out-of-service nodes
    after a removal, as a count or a share (rounded up). Counts GPUs, not nodes."""
    max_actions_per_hour: int = Field(default=20, ge=1)
    """maxActionsPerHour: most actions that change the cluster (every action but `open_ticket`
    and `silence`) let through in any sliding hour, fleet-wide."""
    storm_cooldown_minutes: float = Field(default=10.0, ge=0)
    """stormCooldownDuration: after a capacity limit blocked a removal in a pool or domain, no
    new removal there for this long, even once it is back within its limit. 0 disables."""
    breaker_threshold: int = Field(default=10, ge=1)
    """Circuit breaker: nodes cordoned, drained, tainted, reset or rebooted within
    `breaker_window_minutes` after which the next removal trips it. Open, it blocks every
    removal until an approver resets it (`/gpu breaker reset`, `gpu-oncall breaker reset`)."""
    breaker_window_minutes: float = Field(default=60.0, gt=0)
    """The circuit breaker's sliding window."""


class TicketSettings(SettingsGroup):
    webhook_url: str | None = None
    """Where `open_ticket` POSTs tickets. Unset: tickets are recorded on the incident timeline."""
    token: SecretStr | None = None
    """Bearer token for the ticket webhook."""


class TimeoutSettings(SettingsGroup):
    http_seconds: float = 5.0
    """Timeout for every outbound HTTP call (ticket webhook, Prometheus, Alertmanager)."""


class PrometheusSettings(SettingsGroup):
    url: str = "http://127.0.0.1:9090"
    """Prometheus base URL (with a path prefix if it has one, e.g. `https://h/prometheus`);
    used when `telemetry` is `prometheus`. Thanos Query and Mimir's Prometheus API work too."""
    bearer_token: SecretStr | None = None
    """Sent as `Authorization: Bearer ...` (an authenticating proxy, Grafana Cloud, Mimir)."""
    basic_auth_user: str | None = None
    """Basic-auth user (Prometheus `--web.config.file` `basic_auth_users`, or a proxy)."""
    basic_auth_password: SecretStr | None = None
    """Basic-auth password."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers, e.g. `{"X-Scope-OrgID": "gpu"}` for a multi-tenant Mimir."""
    ca_file: Path | None = None
    """PEM CA bundle that signs the server's certificate. Unset: the system trust store."""
    insecure_skip_verify: bool = False
    """Skip TLS certificate verification (testing only)."""
    timeout_seconds: float | None = Field(default=None, gt=0)
    """Per-query timeout, also sent as Prometheus' own `timeout`. Unset: `timeouts.http_seconds`."""
    retries: int = Field(default=2, ge=0, le=10)
    """Retries after a refused connection or HTTP 429/502/503/504, with exponential backoff."""
    backoff_seconds: float = Field(default=0.2, ge=0)
    """Backoff factor between retries (0.2 s: waits 0, 0.4 s, 0.8 s ...)."""
    match: dict[str, str] = Field(default_factory=dict)
    """Label matchers added to every query, e.g. `{"cluster": "h100-east"}` when one
    Prometheus (or Thanos) holds several clusters."""
    max_concurrency: int = Field(default=8, ge=1)
    """Queries sent at once when several signals are read together."""


class ServerSettings(SettingsGroup):
    host: str = "127.0.0.1"
    """Address `gpu-oncall serve` listens on (`0.0.0.0` inside a container)."""
    port: int = 8080
    """Port `gpu-oncall serve` listens on."""
    token: SecretStr | None = None
    """Bearer token Alertmanager must send on `POST /alerts` (its `http_config.authorization`).
    Unset: the webhook is open (only for loopback or a private network)."""
    workers: int = Field(default=4, ge=1)
    """Triage runs executing at once; webhooks never wait for them."""
    queue_limit: int = Field(default=1000, ge=1)
    """Triage runs queued in this process for a worker; beyond it the triage waits in the
    database (the timeline says so, `gpu_oncall_triage_runs_total{outcome="deferred"}` counts
    it) and a worker claims it when one is free (the scheduler's takeover tick)."""
    max_body_bytes: int = Field(default=10_000_000, ge=1024)
    """Largest webhook body accepted on `POST /alerts` (413 above it, before it is read). Other
    routes have their own limits (docs/limits.md): none on GET, Slack's own on /slack/events."""
    max_connections: int = Field(default=1000, ge=1)
    """Connections (and requests in progress) at once; beyond it a request gets 503 at once."""
    max_bytes_in_flight: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    """Request body bytes held at once across all requests; a request whose declared length
    does not fit gets 503 (with Retry-After) before its body is read."""
    expiry_check_seconds: float = Field(default=30.0, gt=0)
    """How often `serve` looks for approvals past their expiry and takes their rejected branch."""
    backlog: int = Field(default=2048, ge=1)
    """Listen backlog: connections the kernel queues before the server accepts them (capped by
    the kernel's `net.core.somaxconn`). A burst of webhook redeliveries waits here, not reset."""
    max_concurrency: int = Field(default=16, ge=1)
    """Requests handled at once (webhooks, probes, metrics, Slack); beyond it they wait in a
    queue, they are not refused. Bodies are read before a request takes one of these."""
    read_timeout_seconds: float = Field(default=30.0, gt=0)
    """Longest a request's headers may take to arrive (from connecting, or from the request's
    first byte), and then its body: slow headers close the connection, a stalled body gets 408
    and its connection closed. Neither ever holds a handler thread."""
    keepalive_seconds: float = Field(default=5.0, ge=1)
    """How long an idle keep-alive connection stays open for its next request."""
    shutdown_grace_seconds: float = Field(default=30.0, ge=1)
    """On SIGTERM/Ctrl-C: how long in-flight requests may take to finish after the server stops
    accepting; then queued triage is handed back and the process exits."""


class AlertmanagerSettings(SettingsGroup):
    url: str | None = None
    """Alertmanager base URL for silences (e.g. `http://alertmanager:9093`). Unset: the
    `silence` action records the silence on the timeline only."""
    token: SecretStr | None = None
    """Bearer token for the Alertmanager API (when it sits behind an authenticating proxy)."""
    silence_labels: list[str] = Field(default_factory=list)
    """Alert labels that name a node, one silence each. Empty: the host labels of `labels`
    (`Hostname`, `instance`, `node` by default)."""


class IntakeSettings(SettingsGroup):
    storm_threshold: int = Field(default=8, ge=0)
    """Firing alerts of one alert name for this many different targets in one storm domain
    within `storm_window_minutes` open one parent incident instead of one each. 0 disables."""
    storm_window_minutes: float = Field(default=5.0, gt=0)
    """How far back alerts count towards a storm."""
    storm_labels: list[str] = Field(default_factory=lambda: ["rack", "leaf"])
    """Alert labels that name a storm domain (the first one present wins); alerts with none
    of them group fleet-wide."""


class SlackSettings(SettingsGroup):
    bot_token: SecretStr | None = None
    """Bot token (`xoxb-...`, OAuth & Permissions). Unset: Slack is off."""
    signing_secret: SecretStr | None = None
    """Signing secret (Basic Information); every HTTP request from Slack is verified with it."""
    app_token: SecretStr | None = None
    """App-level token (`xapp-...`, scope `connections:write`) for `serve --socket-mode`."""
    api_url: str = "https://slack.com/api/"
    """Slack Web API base URL (change only for a proxy or a test server)."""
    incident_channel: str | None = None
    """Channel id where alert-triggered incidents are posted when no rule below matches.
    Unset (and no rule matches): alert triage is not posted to Slack."""
    channels_by_runbook: dict[str, str] = Field(default_factory=dict)
    """Runbook name -> channel id for its alert-triggered incidents (checked first)."""
    channels_by_severity: dict[str, str] = Field(default_factory=dict)
    """Alert severity (`critical`, `warning`...) -> channel id (checked second)."""
    update_interval_seconds: float = Field(default=1.0, ge=0)
    """Least time between two in-place updates of a live triage message (the last always goes)."""
    usergroup_cache_seconds: float = Field(default=60.0, ge=0)
    """How long user-group membership (`usergroups.users.list`) is cached."""
    workers: int = Field(default=4, ge=1)
    """Runs started or resumed from Slack that execute at once (acks never wait for them)."""


class KubernetesSettings(SettingsGroup):
    kubeconfig: Path | None = None
    """Kubeconfig file used when `cluster` is `kubernetes` outside a pod. Unset: `$KUBECONFIG`,
    then `~/.kube/config`."""
    context: str | None = None
    """Kubeconfig context to use. Unset: the file's `current-context`."""
    in_cluster: bool | None = None
    """Use the pod's service account (token and CA under
    `/var/run/secrets/kubernetes.io/serviceaccount`). Unset: detected from
    `KUBERNETES_SERVICE_HOST`; `false` forces the kubeconfig."""
    timeout_seconds: float | None = Field(default=None, gt=0)
    """Per-request timeout against the API server. Unset: `timeouts.http_seconds`."""
    retries: int = Field(default=3, ge=0, le=10)
    """Retries after a connection error or HTTP 429/5xx, with exponential backoff."""
    backoff_seconds: float = Field(default=0.5, ge=0)
    """Backoff factor between retries (0.5 s: waits 0.5, 1, 2 s ...)."""
    qps: float = Field(default=20.0, gt=0)
    """Client-side limit on requests per second to the API server (client-go's default is 5;
    the bot's bursts are short: one drain evicts a node's pods)."""
    burst: int = Field(default=40, ge=1)
    """Requests allowed at once above `qps` before the limiter waits."""
    marker_prefix: str = Field(default="gpu-oncall.io", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    """DNS prefix of the annotations the bot writes on nodes it cordons or taints
    (`<prefix>/cordoned-by`, `/cordon-reason`, `/incident`, `/tainted-by`...;
    docs/operations.md)."""
    protected_label: str = "gpu-oncall.io/protected"
    """Node label that makes the bot refuse to cordon, drain or taint a node (value `true`)."""


class SlurmSettings(SettingsGroup):
    """A Slurm cluster (`cluster: slurm`; docs/slurm.md): slurmrestd for reads and, where the
    served REST version has them, node updates and cancels; `scontrol` for the rest."""

    url: str = "http://127.0.0.1:6820"
    """slurmrestd's URL (loopback or a TLS-terminating proxy in front of it)."""
    user: str = "root"
    """The Slurm user the token belongs to (`X-SLURM-USER-NAME`): an operator (root, SlurmUser
    or AdminLevel=Operator), since node updates and cancels of others' jobs need one."""
    token: SecretStr | None = None
    """The JWT for `user` (`X-SLURM-USER-TOKEN`; `scontrol token username=U lifespan=S` as
    root). Never forwarded to `scontrol`, whose environment drops `SLURM_JWT`."""
    scontrol: str = "scontrol"
    """Path of `scontrol` (drain/resume on Slurm 22.05, requeue on every version). It runs as
    the bot's Unix user through munge: that user must be root or SlurmUser."""
    conf: Path | None = None
    """slurm.conf for `scontrol` (`SLURM_CONF`). Unset: Slurm's default (/etc/slurm)."""
    drain_mode: Literal["requeue", "cancel"] = "requeue"
    """What `drain` does to the jobs on a node after draining it: `requeue` (jobs that allow it
    restart elsewhere from their checkpoint; `--no-requeue` jobs are reported blocked) or
    `cancel`. A drain step's `on_no_requeue` param (block | cancel) overrides it for
    `--no-requeue` jobs (docs/slurm.md)."""
    reason_prefix: str = Field(default="gpu-oncall:", min_length=2)
    """Start of every drain reason the bot writes; only drains whose reason starts with it are
    the bot's (LBNL NHC uses `NHC:`)."""
    domain_features: dict[str, str] = Field(default_factory=lambda: {"rack-": "gpu-oncall.io/rack"})
    """Node features that name a topology domain: feature prefix -> the label it fills, e.g.
    `{"rack-": "gpu-oncall.io/rack"}` (feature `rack-07` puts the node in rack `rack-07`)."""
    timeout_seconds: float | None = Field(default=None, gt=0)
    """Per-request timeout against slurmrestd and for each `scontrol` call. Unset:
    `timeouts.http_seconds` (scontrol: four times that)."""
    retries: int = Field(default=3, ge=0, le=10)
    """Retries after a connection error or HTTP 429/502/503/504, with exponential backoff."""
    agent_script: Path = Path("/etc/gpu-oncall/node-agent.sh")
    """The batch script `gpu_reset` runs on the node with `agent.mode: job` on Slurm
    (deploy/slurm/node-agent.sh); read at start-up."""
    agent_environment: dict[str, str] = Field(default_factory=dict)
    """Extra environment of the agent's batch job (e.g. `GPU_ONCALL_NVIDIA_SMI`)."""
    turns_file: Path | None = None
    """A file every bot process of this host locks (one byte per node) so that their REST reads
    of one node take turns: two that overlap crash a Slurm 22.05 slurmctld (docs/slurm.md).
    Unset: a process's own threads take turns, other processes (replicas, a CLI `approve`)
    do not. deploy/slurm sets /var/lib/gpu-oncall/slurm-node-turns."""


class WorkSettings(SettingsGroup):
    lease_seconds: float = Field(default=60.0, gt=0)
    """How long a worker's claim on a piece of work (a triage run, a resumed approval, a
    verification timer) lasts without a heartbeat; after it, another worker or replica takes
    the work over from the run's last checkpoint (docs/operations.md)."""
    heartbeat_seconds: float = Field(default=10.0, gt=0)
    """How often a busy worker extends its leases (well below `lease_seconds`)."""
    takeover_seconds: float = Field(default=15.0, gt=0)
    """How often `serve` looks for work nobody holds: new, due, or left by a dead worker."""
    max_attempts: int = Field(default=3, ge=1)
    """Claims of one piece of work before the bot gives up on it: its run and incident end
    `failed` with the reason on the timeline."""
    worker_id: str | None = None
    """This process's name on its leases. Unset: `host:pid:random`, unique per process."""
    step_deadline_seconds: float = Field(default=STEP_DEADLINE_SECONDS, gt=0)
    """Longest a gather step's outside call (a telemetry query, a cluster read) is waited for;
    past it the step's input is unavailable, the message naming runbook, step and deadline,
    and the run goes on (docs/limits.md)."""


class SimSettings(SettingsGroup):
    scenario: Path | None = None
    """Scenario file for the simulated fleet (the embedded default). Unset: the shipped ECC demo."""


class AgentSettings(SettingsGroup):
    """The node agent that carries out `gpu_reset` and `reboot` (docs/safety.md): an HTTP
    endpoint or a Kubernetes Job on the node. Without one (`mode: none`, or neither `mode` nor
    `url` set) those actions open a ticket instead (`ticket_queue`), never a silent skip."""

    mode: Literal["http", "job", "none"] | None = None
    """`http`: POST to `url`; `job`: run a privileged Kubernetes Job from `job_template` on the
    node (on the simulated fleet it completes at once; with `cluster: slurm`, a Slurm batch job
    from `slurm.agent_script` and `scontrol reboot`, docs/slurm.md); `none`: open a ticket.
    Unset: `http` when `url` is set, else `none`."""
    job_template: str = "/etc/gpu-oncall/node-agent/job-template.yaml"
    """The batch/v1 Job template for `mode: job` (deploy/kubernetes/node-agent/job-template.yaml,
    mounted from the ConfigMap gpu-oncall-node-agent); checked at start-up."""
    namespace: str = "gpu-oncall-agent"
    """Namespace the node-agent Jobs run in (privileged pods: its Pod Security level is
    `privileged`; the bot's Role there allows create/get jobs, nothing cluster-wide)."""
    url: str | None = None
    """HTTP endpoint of the node agent. The bot POSTs `{"node", "gpu", "action",
    "idempotency_key"}` and reads `{"outcome": "changed"|"already_done"|"failed", "detail"}`."""
    token: SecretStr | None = None
    """Bearer token sent to the node agent."""
    timeout_seconds: float = Field(default=120.0, gt=0)
    """How long a GPU reset or reboot request may take before it is reported failed."""
    ticket_queue: str = "node-ops"
    """Queue of the ticket `gpu_reset`/`reboot` open when no agent is configured."""

    def chosen_mode(self) -> str:
        """The mode in effect: `mode`, or `http` when only `url` is set, else `none`."""
        return self.mode or ("http" if self.url else "none")


class IdentitySettings(SettingsGroup):
    """Who the command line acts as (approvals, requests, notes)."""

    cli_user: str | None = None
    """The CLI's identity, recorded as `cli:<cli_user>`. Unset: the operating-system user."""
    admins: list[str] = Field(default_factory=list)
    """Identities (`cli:<user>`) allowed to act as someone else with `approve --as`; the
    decision is recorded as `cli:alice as cli:bob (admin)`. Empty: nobody may use `--as`."""


class PagesSettings(SettingsGroup):
    """The incident pages `serve` publishes: `/incidents` and `/incidents/INC-N`
    (docs/postmortems.md). Closed by default: `auth` must be set to `none` to open them."""

    auth: Literal["token", "proxy", "none"] = "token"
    """How a page request proves who it is: `token` (an `Authorization: Bearer <pages.token>`
    header), `proxy` (a trusted auth proxy in front of the bot sets `proxy_header`; only that
    header is honoured, and only in this mode) or `none` (anyone who can reach the port)."""
    token: SecretStr | None = None
    """Bearer token for `auth: token`. Unset: every page request is refused with 401."""
    proxy_header: str = "X-Forwarded-User"
    """Header carrying the signed-in user for `auth: proxy` (oauth2-proxy, an ingress auth)."""
    base_url: str | None = None
    """Public URL where the pages are reached (e.g. `https://oncall.example.com`); Slack
    messages and CLI output then link each incident's page. Unset: no links are shown."""
    link_minutes: int = Field(default=240, ge=5, le=7 * 24 * 60)
    """With `auth: token`, how long the signed link Slack posts to an incident page opens that
    page (one incident, read only; a fresh link comes with every update of the message)."""
    refresh_seconds: int = Field(default=30, ge=5)
    """How often the live page of an open incident reloads itself (a meta refresh, no script)."""
    recent_limit: int = Field(default=50, ge=1, le=500)
    """Most incidents listed on `/incidents`."""

    def incident_url(self, ref: str) -> str | None:
        """The page of incident `ref` (INC-7) under `base_url`, or None when unset."""
        return None if self.base_url is None else f"{self.base_url.rstrip('/')}/incidents/{ref}"


class EvidenceSettings(SettingsGroup):
    """Files and pasted text classified in Slack (`/gpu classify`, a file shared in an incident
    thread; docs/evidence.md)."""

    max_file_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    """Largest Slack file downloaded for classification; a larger file is refused, said so in
    the thread. Tarballs and `.gz` files are read within the same limits as `triage-bundle`."""
    max_files: int = Field(default=10, ge=1, le=100)
    """Most files of one message that are downloaded and read together."""
    kernel_log_lookback_hours: float = Field(default=24.0, gt=0)
    """Kernel-log lines older than this (or than the runbook's `window`, if longer) are the
    node's history ("last XID 48 2 days ago"), not a current fault: they are reported, never
    counted. Lines without a wall-clock stamp (bare `dmesg` seconds since boot) count as
    current."""


class LogSettings(SettingsGroup):
    """What the bot writes to its log (standard error)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] | None = None
    """Lowest level logged. Unset: `INFO` for `serve` (its effective settings at start, each
    incident, run and action), `WARNING` for the other commands (their output is the answer)."""
    format: Literal["text", "json"] = "text"
    """`text`: `LEVEL logger: message`; `json`: one JSON object per line (`at`, `level`,
    `logger`, `message`, and `incident_id`, `run_id`, `step`, `action` when known), for a log
    shipper."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="GPU_ONCALL_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    storage: StorageSettings = Field(default_factory=StorageSettings)
    labels: LabelSettings = Field(default_factory=LabelSettings)
    workload_labels: WorkloadLabelSettings = Field(default_factory=WorkloadLabelSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    pages: PagesSettings = Field(default_factory=PagesSettings)
    safety: SafetySettings = Field(default_factory=SafetySettings)
    tickets: TicketSettings = Field(default_factory=TicketSettings)
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    sim: SimSettings = Field(default_factory=SimSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    alertmanager: AlertmanagerSettings = Field(default_factory=AlertmanagerSettings)
    intake: IntakeSettings = Field(default_factory=IntakeSettings)
    work: WorkSettings = Field(default_factory=WorkSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    log: LogSettings = Field(default_factory=LogSettings)
    runbook_dirs: list[Path] = Field(default_factory=list)
    """Extra directories of operator runbooks, loaded after the shipped ones. Each must exist:
    a missing one is a start-up error, not a silently smaller catalog."""
    telemetry: Literal["sim", "prometheus"] = "sim"
    """Telemetry backend: `sim` (the in-process simulated fleet) or `prometheus` (a real
    Prometheus at `prometheus.url`; docs/operations.md)."""
    cluster: Literal["sim", "kubernetes", "slurm"] = "sim"
    """Cluster backend: `sim` (the in-process simulated fleet), `kubernetes` (a real API
    server, settings in `kubernetes`; docs/operations.md) or `slurm` (slurmctld through
    slurmrestd and scontrol, settings in `slurm`; docs/slurm.md). Chosen independently of
    `telemetry`; with neither `sim`, no simulated fleet is built."""

    @field_validator("runbook_dirs")
    @classmethod
    def _runbook_dirs_exist(cls, dirs: list[Path]) -> list[Path]:
        for folder in dirs:
            if not folder.is_dir():
                missing = "is not a directory" if folder.exists() else "does not exist"
                raise ValueError(f"runbook directory '{folder}' {missing}")
        return dirs


def read_settings_checked(*, env_file: Path = Path(".env")) -> Settings:
    """Settings from the environment and `.env`, after refusing any `GPU_ONCALL_*` name there
    that no setting reads (UnknownSettingError). The only reader of `os.environ`."""
    import os

    check_setting_variables(os.environ, source="environment")
    if env_file.is_file():
        from dotenv import dotenv_values

        check_setting_variables(dotenv_values(env_file), source=str(env_file))
    return Settings()


NODE_AGENT_VARIABLES = frozenset({"GPU_ONCALL_ACTION", "GPU_ONCALL_NODE", "GPU_ONCALL_GPU"})
"""Variables the bot sets for its node agent's Job (integrations/node_jobs.py), not settings."""


class UnknownSettingError(ValueError):
    """A `GPU_ONCALL_*` variable names no setting (a typo would otherwise be ignored)."""


def setting_variables() -> dict[str, bool]:
    """Every `GPU_ONCALL_*` variable a setting reads -> whether deeper `__KEY`s nest under it
    (a mapping, or a whole group given as JSON)."""
    names: dict[str, bool] = {}
    for name, field in Settings.model_fields.items():
        variable = f"GPU_ONCALL_{name.upper()}"
        group = field.annotation
        if isinstance(group, type) and issubclass(group, BaseModel):
            names[variable] = False
            for sub, info in group.model_fields.items():
                nested = typing.get_origin(info.annotation) is dict or info.annotation is dict
                names[f"{variable}__{sub.upper()}"] = nested
        else:
            names[variable] = False
    return names


def check_setting_variables(names: Iterable[str], *, source: str = "environment") -> None:
    """Raise UnknownSettingError for the first `GPU_ONCALL_*` name in `names` that no setting
    reads, naming the closest valid variable. Case-insensitive, as the settings are."""
    known = setting_variables()
    nesting = tuple(f"{v}__" for v, nested in known.items() if nested)
    for raw in sorted(names):
        name = raw.upper()
        if not name.startswith("GPU_ONCALL_") or name in NODE_AGENT_VARIABLES:
            continue
        if name in known or name.startswith(nesting):
            continue
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; docs/configuration.md lists them"
        raise UnknownSettingError(f"configuration: {raw} ({source}) is not a setting{hint}")


def render_settings_doc() -> str:
    """docs/configuration.md: every setting, its variable, default and description."""
    lines = [
        "# Configuration",
        "",
        "Settings come from `GPU_ONCALL_*` environment variables or a `.env` file in the working",
        "directory; groups nest with `__`. Lists and maps are JSON. Secrets are never logged.",
        "This file is generated by `python -m bot.config` (a test checks it is current).",
        "",
    ]
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines += [f"## `{name}`", "", "| variable | default | meaning |", "|---|---|---|"]
            for sub, info in annotation.model_fields.items():
                doc = _doc_of(annotation, sub)
                lines.append(_row(f"GPU_ONCALL_{name.upper()}__{sub.upper()}", info, doc))
            lines.append("")
        else:
            lines += [f"## `{name}`", "", "| variable | default | meaning |", "|---|---|---|"]
            lines += [_row(f"GPU_ONCALL_{name.upper()}", field, _doc_of(Settings, name)), ""]
    return "\n".join(lines)


@cache
def attribute_docs() -> dict[tuple[str, str], str]:
    """(class name, field name) -> the docstring written under the field in this file."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    docs: dict[tuple[str, str], str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[(node.name, stmt.target.id)] = after.value.value
    return docs


def _doc_of(owner: type, field: str) -> str:
    docs = attribute_docs()
    found = (docs.get((cls.__name__, field)) for cls in owner.__mro__)
    return next((doc for doc in found if doc is not None), "")


def _row(variable: str, info: FieldInfo, doc: str = "") -> str:
    default = info.get_default(call_default_factory=True)
    if isinstance(default, SecretStr) or "secret" in str(info.annotation).lower():
        shown = "unset" if default is None else "(secret)"
    elif isinstance(default, BaseModel):
        shown = "-"
    elif isinstance(default, list | dict | bool):
        shown = f"`{json.dumps(default)}`"
    else:
        shown = "unset" if default is None else f"`{default}`"
    text = " ".join((info.description or doc).split()).replace("|", "\\|")
    return f"| `{variable}` | {shown} | {text} |"


if __name__ == "__main__":
    sys.stdout.write(render_settings_doc())

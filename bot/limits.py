"""Every limit on outside input, in one place: what a request, webhook, paste, tarball,
template, expression or timestamp may cost before it is refused (docs/limits.md lists them).

Limits an operator may tune are settings (`Settings.server.*`, `Settings.evidence.*`); this
module names them next to the fixed ones so the list is complete. Fixed limits are constants
here, imported by the code that enforces them. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

# -- HTTP front (bot/serving/front.py) ---------------------------------------------------------
SLACK_BODY_BYTES = 1024 * 1024
"""Largest body accepted on `/slack/events` (Slack's own payloads are far below it: a slash
command is a few hundred bytes, an interactive payload a few tens of kilobytes)."""
MAX_CONNECTIONS = 1000
"""Default for `server.max_connections`: connections (and requests in progress) at once;
beyond it uvicorn answers 503 at once, so a flood holds no body buffer."""
MAX_BYTES_IN_FLIGHT = 64 * 1024 * 1024
"""Default for `server.max_bytes_in_flight`: request body bytes reserved at once, across every
connection; a request whose declared length does not fit is a 503 before it is read."""

# -- Alertmanager webhook (bot/intake/alerts.py) -----------------------------------------------
ALERT_MAX_AGE = timedelta(days=400)
"""Oldest `startsAt`/`endsAt` accepted, counted back from the time the webhook arrives."""
ALERT_MAX_SKEW = timedelta(days=1)
"""Furthest into the future a `startsAt` may be (a sender's clock ahead of ours). `endsAt` of
a firing alert is a promise about the future and is not checked."""
REJECTED_STARTS_AT_EPOCH = "1970-01-01T00:00:00+00:00"
"""Stored `starts_at` of a rejected alert whose own `startsAt` is unusable (so redeliveries of
it deduplicate)."""

# -- `/gpu fired` (bot/incidents/humans.py) ----------------------------------------------------
FIRED_MAX_BEFORE_DETECTION = timedelta(days=30)
"""Furthest before its detection a person may date an incident's start of impact."""

# -- Charts and pages (bot/incidents/charts.py) ------------------------------------------------
CHART_MAX_TICKS = 12
"""Most axis ticks any chart draws, whatever span its data covers."""
CHART_MAX_POINTS = 2000
"""Most points one chart series draws (longer series are thinned evenly)."""

# -- Runbook expressions and templates (bot/engine/expressions.py, templates.py) ---------------
EXPRESSION_SECONDS = 1.0
"""Longest one CEL check may evaluate (then it fails naming the step)."""
EXPRESSION_OUTPUT_CHARS = 100_000
"""Largest value (as JSON text) one CEL check may produce."""
TEMPLATE_SECONDS = 1.0
"""Most CPU time (of the rendering thread) one Jinja template may take."""
TEMPLATE_OUTPUT_CHARS = 100_000
"""Largest text one Jinja template may produce."""

# -- Evidence bundles (bot/intake/bundles.py) --------------------------------------------------
BUNDLE_CPU_SECONDS = 20.0
"""CPU time one bundle may spend decompressing and reading (every codec)."""
BUNDLE_MAX_ENTRIES = 10_000
"""Most tar entries (files, directories, links) read from one bundle."""

# -- Slack file downloads (bot/slack/classify.py) ----------------------------------------------
SLACK_DOWNLOAD_SECONDS = 30.0
"""Longest one shared file may take to download in full (a per-read timeout alone lets a
slow drip hold a worker)."""

# -- Runs (bot/engine/running.py, storage/transient.py) ----------------------------------------
STORAGE_RETRY_BACKOFF_SECONDS = (0.5, 1.0, 2.0)
"""Pauses before each retry of a run's stream after a transient storage error (the database
busy or locked, a serialization failure, a reset connection): 3 retries, each try waiting up to
the SQLite busy timeout (5 s) too, so at most ~19 s, well inside the 60 s work lease that the
heartbeat keeps alive meanwhile."""

STEP_DEADLINE_SECONDS = 120.0
"""Default for `work.step_deadline_seconds`: longest a gather step's outside call (a telemetry
query, a cluster read) is waited for; past it the step's input is unavailable, naming runbook,
step and deadline, and the run goes on (bot/engine/deadlines.py)."""

# -- `/metrics` (bot/serving/exposition.py) ----------------------------------------------------
METRIC_SEVERITIES = ("critical", "error", "warning", "info")
"""The `severity` label values `/metrics` keeps; any other severity an alert carried is counted
under `other`, so free-form severities cannot grow the exposition (5 values at most)."""
OTHER_SEVERITY = "other"


def metric_severity(severity: str) -> str:
    """`severity` as a `/metrics` label: itself when known, else `other`."""
    return severity if severity in METRIC_SEVERITIES else OTHER_SEVERITY


@dataclass(frozen=True)
class Limit:
    """One row of docs/limits.md: the limit, its default and where it is set."""

    what: str
    default: str
    setting: str


def documented() -> list[Limit]:
    """Every limit, as docs/limits.md lists it (a test checks the page names each one)."""
    return [
        Limit("body bytes on `POST /alerts`", "10,000,000", "SERVER__MAX_BODY_BYTES"),
        Limit("body bytes on `POST /slack/events`", f"{SLACK_BODY_BYTES:,}", "SLACK_BODY_BYTES"),
        Limit("body bytes on GET/HEAD routes and unknown paths", "0", "fixed"),
        Limit("connections at once", f"{MAX_CONNECTIONS:,}", "SERVER__MAX_CONNECTIONS"),
        Limit("body bytes in flight, all requests", "64 MiB", "SERVER__MAX_BYTES_IN_FLIGHT"),
        Limit("alerts per webhook", "10,000", "MAX_ALERTS_PER_WEBHOOK"),
        Limit("labels / annotations per alert", "128", "MAX_KEYS"),
        Limit("alert timestamp ahead of us", f"{ALERT_MAX_SKEW.days} day", "ALERT_MAX_SKEW"),
        Limit(
            "`fired` before the incident's detection",
            f"{FIRED_MAX_BEFORE_DETECTION.days} days",
            "FIRED_MAX_BEFORE_DETECTION",
        ),
        Limit(
            "chart ticks / points per series",
            f"{CHART_MAX_TICKS} / {CHART_MAX_POINTS:,}",
            "CHART_MAX_TICKS",
        ),
        Limit(
            "bundle archive entries (directories included)",
            f"{BUNDLE_MAX_ENTRIES:,}",
            "BUNDLE_MAX_ENTRIES",
        ),
        Limit("bundle CPU time", f"{BUNDLE_CPU_SECONDS:g} s", "BUNDLE_CPU_SECONDS"),
        Limit("CEL evaluation cost", "2,500,000 steps", "EXPRESSION_COST"),
        Limit(
            "CEL result size", f"{EXPRESSION_OUTPUT_CHARS:,} characters", "EXPRESSION_OUTPUT_CHARS"
        ),
        Limit(
            "Jinja output / render CPU time",
            f"{TEMPLATE_OUTPUT_CHARS:,} characters / {TEMPLATE_SECONDS:g} s",
            "TEMPLATE_OUTPUT_CHARS",
        ),
        Limit(
            "Slack file download, start to end",
            f"{SLACK_DOWNLOAD_SECONDS:g} s",
            "SLACK_DOWNLOAD_SECONDS",
        ),
        Limit("alert timestamp age", f"{ALERT_MAX_AGE.days} days", "ALERT_MAX_AGE"),
        Limit(
            "a gather step's outside call",
            f"{STEP_DEADLINE_SECONDS:g} s",
            "WORK__STEP_DEADLINE_SECONDS",
        ),
        Limit(
            "retries of a run after a transient storage error",
            f"{len(STORAGE_RETRY_BACKOFF_SECONDS)}, after "
            + ", ".join(f"{s:g}" for s in STORAGE_RETRY_BACKOFF_SECONDS)
            + " s",
            "STORAGE_RETRY_BACKOFF_SECONDS",
        ),
        Limit(
            "`severity` values on `/metrics`",
            f"{len(METRIC_SEVERITIES) + 1} ({', '.join(METRIC_SEVERITIES)}, {OTHER_SEVERITY})",
            "METRIC_SEVERITIES",
        ),
    ]

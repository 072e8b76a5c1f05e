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
"""Longest one Jinja template may render."""
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

# -- /metrics (bot/serving/metrics.py) -----------------------------------------------------------
METRIC_SEVERITIES = ("critical", "warning", "info", "page", "none")
"""Severity label values kept on `/metrics`; any other value is counted as `other`."""


@dataclass(frozen=True)
class Limit:
    """One row of docs/limits.md: the limit, its default and where it is set."""

    what: str
    default: str
    setting: str


def documented() -> list[Limit]:
    """Every limit, for docs/limits.md (a test checks the page lists each one)."""
    from bot.intake import alerts, commands
    from bot.intake.bundles import Budget

    budget = Budget()
    return [
        Limit("body bytes on POST /alerts", "10000000", "server.max_body_bytes"),
        Limit("body bytes on /slack/events", str(SLACK_BODY_BYTES), "fixed"),
        Limit("body bytes on GET/HEAD routes", "0 (a body is refused)", "fixed"),
        Limit("connections at once", str(MAX_CONNECTIONS), "server.max_connections"),
        Limit("body bytes in flight", str(MAX_BYTES_IN_FLIGHT), "server.max_bytes_in_flight"),
        Limit("alerts per webhook", str(alerts.MAX_ALERTS_PER_WEBHOOK), "fixed"),
        Limit("labels/annotations per alert", str(alerts.MAX_KEYS), "fixed"),
        Limit("label value characters", str(alerts.MAX_LABEL_VALUE_CHARS), "fixed"),
        Limit("annotation value characters", str(alerts.MAX_ANNOTATION_VALUE_CHARS), "fixed"),
        Limit("alert timestamp age", f"{ALERT_MAX_AGE.days} days", "fixed"),
        Limit("alert timestamp ahead of us", f"{ALERT_MAX_SKEW.days} day", "fixed"),
        Limit("`fired` before detection", f"{FIRED_MAX_BEFORE_DETECTION.days} days", "fixed"),
        Limit("/gpu command characters", str(commands.MAX_COMMAND_CHARS), "fixed"),
        Limit("chart ticks", str(CHART_MAX_TICKS), "fixed"),
        Limit("chart points per series", str(CHART_MAX_POINTS), "fixed"),
        Limit("bundle bytes decompressed", str(budget.max_bytes), "fixed"),
        Limit("bundle tar entries", str(BUNDLE_MAX_ENTRIES), "fixed"),
        Limit("bundle CPU seconds", f"{BUNDLE_CPU_SECONDS:g}", "fixed"),
        Limit("CEL check seconds / output chars", f"{EXPRESSION_SECONDS:g} / "
              f"{EXPRESSION_OUTPUT_CHARS}", "fixed"),
        Limit("Jinja template seconds / output chars", f"{TEMPLATE_SECONDS:g} / "
              f"{TEMPLATE_OUTPUT_CHARS}", "fixed"),
        Limit("Slack file bytes", "8388608", "evidence.max_file_bytes"),
        Limit("Slack file download seconds", f"{SLACK_DOWNLOAD_SECONDS:g}", "fixed"),
        Limit("severity values on /metrics", str(len(METRIC_SEVERITIES) + 1), "fixed"),
    ]

"""`GET /metrics`: the bot's own Prometheus exposition (text format 0.0.4), written by hand.

Counters of this process (alerts received, deduplicated, unroutable; webhooks by HTTP code;
triage runs by outcome) live in `IntakeCounters`. Incident figures come from the database at
scrape time (incidents by state; MTTD / MTTA / time to diagnosis / MTTM / MTTR histograms by
runbook, layer and severity), so every replica reports the same numbers: scrape one of them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.incidents.mttr import DEFINITIONS, TimestampOrderError
from bot.incidents.states import IncidentState
from bot.incidents.views import IncidentView

PREFIX = "gpu_oncall"

#: Bucket bounds in seconds: minutes to a day for the human-paced figures, sub-second to
#: minutes for the bot's own time to diagnosis.
HUMAN_BUCKETS = (30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 86400.0)
BOT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

_COUNTERS: dict[str, str] = {
    "alerts_received_total": "Alerts received in webhooks (every delivery, duplicates too).",
    "alerts_deduplicated_total": "Alert deliveries already stored (same fingerprint, status, "
    "startsAt): nothing new was created.",
    "alerts_unroutable_total": "Alerts that matched no runbook; stored and listed by "
    "`gpu-oncall alerts --unrouted`.",
    "alert_storms_total": "Alerts that joined a storm's parent incident.",
}


class IntakeCounters:
    """Thread-safe counters of this process; webhook handlers and triage workers add to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plain: Counter[str] = Counter()
        self._webhooks: Counter[str] = Counter()
        self._triage: Counter[str] = Counter()
        self.queue_depth = 0

    def add(self, name: str, amount: int = 1) -> None:
        if name not in _COUNTERS:
            raise KeyError(f"unknown counter '{name}' (counters: {', '.join(_COUNTERS)})")
        with self._lock:
            self._plain[name] += amount

    def webhook(self, code: int) -> None:
        with self._lock:
            self._webhooks[str(code)] += 1

    def triage(self, outcome: str) -> None:
        with self._lock:
            self._triage[outcome] += 1

    def snapshot(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self._plain), dict(self._webhooks), dict(self._triage)


@dataclass
class Histogram:
    """A Prometheus histogram over label sets, filled from observations at scrape time."""

    name: str
    help: str
    bounds: Sequence[float]
    labelnames: tuple[str, ...]
    series: dict[tuple[str, ...], list[float]] = field(default_factory=dict)

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        self.series.setdefault(labels, []).append(value)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for labels, values in sorted(self.series.items()):
            base = dict(zip(self.labelnames, labels, strict=True))
            for bound in self.bounds:
                count = sum(1 for v in values if v <= bound)
                lines.append(_sample(f"{self.name}_bucket", base | {"le": _num(bound)}, count))
            lines.append(_sample(f"{self.name}_bucket", base | {"le": "+Inf"}, len(values)))
            lines.append(_sample(f"{self.name}_sum", base, sum(values)))
            lines.append(_sample(f"{self.name}_count", base, len(values)))
        return lines


def render_metrics(
    counters: IntakeCounters, *, by_state: Mapping[str, int], incidents: Iterable[IncidentView]
) -> str:
    """The whole exposition: process counters, incident gauges and MTTR histograms."""
    plain, webhooks, triage = counters.snapshot()
    lines: list[str] = []
    for name, help_text in _COUNTERS.items():
        lines += _family(f"{PREFIX}_{name}", "counter", help_text, [({}, plain.get(name, 0))])
    lines += _family(
        f"{PREFIX}_webhooks_total",
        "counter",
        "POST /alerts requests by HTTP status code.",
        [({"code": code}, n) for code, n in sorted(webhooks.items())],
    )
    lines += _family(
        f"{PREFIX}_triage_runs_total",
        "counter",
        "Triage runs by outcome (queued, completed, awaiting_approval, failed, dropped, "
        "not_started).",
        [({"outcome": outcome}, n) for outcome, n in sorted(triage.items())],
    )
    lines += _family(
        f"{PREFIX}_triage_queue_depth",
        "gauge",
        "Triage runs waiting for a worker.",
        [({}, counters.queue_depth)],
    )
    lines += _family(
        f"{PREFIX}_incidents",
        "gauge",
        "Incidents by state.",
        [({"state": s.value}, by_state.get(s.value, 0)) for s in IncidentState],
    )
    for histogram in figure_histograms(incidents):
        lines += histogram.render()
    return "\n".join(lines) + "\n"


def figure_histograms(incidents: Iterable[IncidentView]) -> list[Histogram]:
    """One histogram per published figure (mttr.DEFINITIONS), by runbook, layer and severity."""
    labelnames = ("runbook", "layer", "severity")
    histograms = {
        d.name: Histogram(
            name=f"{PREFIX}_{d.name}_seconds",
            help=f"{d.label} per incident: {d.formula} (docs/mttr.md).",
            bounds=BOT_BUCKETS if d.name == "time_to_diagnosis" else HUMAN_BUCKETS,
            labelnames=labelnames,
        )
        for d in DEFINITIONS
    }
    for view in incidents:
        try:
            figures = view.figures().as_seconds()
        except TimestampOrderError:
            continue  # corrupt history is reported by the postmortem, not hidden in a bucket
        labels = (view.runbook, view.layer or "undiagnosed", view.severity)
        for name, seconds in figures.items():
            if seconds is not None:
                histograms[name].observe(labels, seconds)
    return list(histograms.values())


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]
) -> list[str]:
    lines = [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} {kind}"]
    return lines + [_sample(name, labels, value) for labels, value in samples]


def _sample(name: str, labels: Mapping[str, str], value: float) -> str:
    if not labels:
        return f"{name} {_num(value)}"
    inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {_num(value)}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")

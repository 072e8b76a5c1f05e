"""`GET /metrics`: the bot's own Prometheus exposition (text format 0.0.4), written by hand.

Counters of this process (alerts received, deduplicated, unroutable; webhooks by HTTP code;
triage runs by outcome) live in `IntakeCounters`. Incident figures come from the database at
scrape time (incidents by state; MTTD / MTTA / time to diagnosis / MTTM / MTTR histograms by
runbook, layer and severity), so every replica reports the same numbers: scrape one of them.
The histograms are read from `figure_buckets`, kept up to date as incidents change
(bot/incidents/figures.py), so a scrape costs the same at 100 and at 100,000 incidents;
`figure_histograms` computes them from the incidents instead (the test oracle and the benchmark's
baseline).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.engine import Engine

from bot.incidents import figures
from bot.incidents.figures import BOT_BUCKETS as BOT_BUCKETS
from bot.incidents.figures import BOUNDS, LOST_GPU_SECONDS, UNDIAGNOSED
from bot.incidents.figures import HUMAN_BUCKETS as HUMAN_BUCKETS
from bot.incidents.mttr import DEFINITIONS, TimestampOrderError
from bot.incidents.states import IncidentState
from bot.incidents.views import IncidentView
from bot.intake.counters import COUNTERS, IntakeCounters
from storage.db import session_scope
from storage.figures import Counts

PREFIX = "gpu_oncall"
_LABELNAMES = ("runbook", "layer", "severity")
_MICRO = timedelta(microseconds=1)

@dataclass
class Series:
    """One label set of a histogram: observations per bucket (not cumulative; the last one is
    +Inf) and their sum in microseconds (exact, whatever the order they were added in)."""

    buckets: list[int]
    micros: int = 0


@dataclass
class Histogram:
    """A Prometheus histogram over label sets."""

    name: str
    help: str
    bounds: Sequence[float]
    labelnames: tuple[str, ...]
    series: dict[tuple[str, ...], Series] = field(default_factory=dict)

    def observe(self, labels: tuple[str, ...], value: timedelta) -> None:
        seconds = value.total_seconds()
        index = next((i for i, b in enumerate(self.bounds) if seconds <= b), len(self.bounds))
        self.add(labels, index, observations=1, micros=value // _MICRO)

    def add(self, labels: tuple[str, ...], index: int, *, observations: int, micros: int) -> None:
        series = self.series.setdefault(labels, Series([0] * (len(self.bounds) + 1)))
        series.buckets[index] += observations
        series.micros += micros

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        les = [_labels({"le": _num(bound)}) for bound in self.bounds] + [_labels({"le": "+Inf"})]
        for labels, series in sorted(self.series.items()):
            total = sum(series.buckets)
            if total == 0:
                continue  # every incident of this label set moved to another one
            inner = _labels(dict(zip(self.labelnames, labels, strict=True)))
            cumulative = 0
            for le, count in zip(les, series.buckets, strict=True):
                cumulative += count
                lines.append(f"{self.name}_bucket{{{inner},{le}}} {cumulative}")
            lines.append(f"{self.name}_sum{{{inner}}} {_num(series.micros / 1_000_000)}")
            lines.append(f"{self.name}_count{{{inner}}} {total}")
        return lines


def render_metrics(
    counters: IntakeCounters, *, by_state: Mapping[str, int], histograms: Iterable[Histogram]
) -> str:
    """The whole exposition: process counters, incident gauges and MTTR histograms."""
    plain, webhooks, triage = counters.snapshot()
    lines: list[str] = []
    for name, help_text in COUNTERS.items():
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
        "Triage runs by outcome (queued, deferred, waiting, completed, awaiting_approval, failed, "
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
        f"{PREFIX}_leader",
        "gauge",
        "1 while this process is the leader running the periodic jobs, else 0.",
        [({}, counters.leader)],
    )
    lines += _family(
        f"{PREFIX}_incidents",
        "gauge",
        "Incidents by state.",
        [({"state": s.value}, by_state.get(s.value, 0)) for s in IncidentState],
    )
    for histogram in histograms:
        lines += histogram.render()
    return "\n".join(lines) + "\n"


def scrape(db: Engine, counters: IntakeCounters) -> str:
    """What `GET /metrics` serves: one read of the maintained rows (incidents by state and the
    histogram buckets), whatever the number of incidents."""
    with session_scope(db) as session:
        counts = figures.read_counts(session)
    by_state = figures.state_counts(counts)
    return render_metrics(counters, by_state=by_state, histograms=counted_histograms(counts))


def _empty_histograms() -> dict[str, Histogram]:
    histograms = {
        d.name: Histogram(
            name=f"{PREFIX}_{d.name}_seconds",
            help=f"{d.label} per incident: {d.formula} (docs/mttr.md).",
            bounds=BOUNDS[d.name],
            labelnames=_LABELNAMES,
        )
        for d in DEFINITIONS
    }
    histograms[LOST_GPU_SECONDS] = Histogram(
        name=f"{PREFIX}_lost_gpu_seconds",
        help="GPU time lost per resolved incident, in GPU-seconds (/3600 for GPU-hours): node "
        "GPUs out of service x time + job GPUs idle x incident duration (docs/mttr.md).",
        bounds=BOUNDS[LOST_GPU_SECONDS],
        labelnames=_LABELNAMES,
    )
    return histograms


def counted_histograms(counts: Counts) -> list[Histogram]:
    """One histogram per published figure (mttr.DEFINITIONS), from the maintained buckets
    (`figures.read_counts`): what `/metrics` serves."""
    histograms = _empty_histograms()
    for (figure, runbook, layer, severity, index), (n, micros) in figures.without_states(
        counts
    ).items():
        histograms[figure].add((runbook, layer, severity), index, observations=n, micros=micros)
    return list(histograms.values())


def figure_histograms(incidents: Iterable[IncidentView]) -> list[Histogram]:
    """The same histograms computed from every incident (the from-scratch computation)."""
    histograms = _empty_histograms()
    for view in incidents:
        if view.kind != "incident":
            continue  # a check (nothing found) or a failed incident (no run finished)
        try:
            figures = view.figures()
        except TimestampOrderError:
            continue  # corrupt history is reported by the postmortem, not hidden in a bucket
        labels = (view.runbook, view.layer or UNDIAGNOSED, view.severity)
        if view.gpu_hours_lost is not None:
            lost = timedelta(hours=view.gpu_hours_lost)  # GPU-seconds, as the buckets
            histograms[LOST_GPU_SECONDS].observe(labels, lost)
        for d in DEFINITIONS:
            value: timedelta | None = getattr(figures, d.name)
            if value is not None:
                histograms[d.name].observe(labels, value)
    return list(histograms.values())


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]
) -> list[str]:
    lines = [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} {kind}"]
    return lines + [_sample(name, labels, value) for labels, value in samples]


def _sample(name: str, labels: Mapping[str, str], value: float) -> str:
    if not labels:
        return f"{name} {_num(value)}"
    return f"{name}{{{_labels(labels)}}} {_num(value)}"


def _labels(labels: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")

"""`GET /metrics`: the bot's own Prometheus exposition, written by `prometheus_client` from a
custom collector over the aggregates this project keeps.

Counters of this process (alerts received, deduplicated, unroutable; webhooks by HTTP code;
triage runs by outcome) live in `IntakeCounters`. Incident figures come from the database at
scrape time (incidents by state; MTTD / MTTA / time to diagnosis / MTTM / MTTR histograms by
runbook, layer and severity), so every replica reports the same numbers: scrape one of them.
The histograms are read from `figure_buckets`, kept up to date as incidents change
(bot/incidents/figures.py), so a scrape costs the same at 100 and at 100,000 incidents;
`figure_histograms` computes them from the incidents instead (the test oracle and the benchmark's
baseline). The bucket arithmetic (`Histogram`) is ours; `prometheus_client` only writes the text.

The `severity` label is bounded (`bot.limits.metric_severity`): alerts carry free-form
severities, and each new value would otherwise be a new series in every histogram.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector
from sqlalchemy.engine import Engine

from bot.incidents import figures
from bot.incidents.figures import BOT_BUCKETS as BOT_BUCKETS
from bot.incidents.figures import BOUNDS, LOST_GPU_SECONDS, UNDIAGNOSED
from bot.incidents.figures import HUMAN_BUCKETS as HUMAN_BUCKETS
from bot.incidents.mttr import DEFINITIONS, TimestampOrderError
from bot.incidents.states import IncidentState
from bot.incidents.views import IncidentView
from bot.intake.counters import COUNTERS, IntakeCounters
from bot.limits import metric_severity
from storage.db import read_scope
from storage.figures import BucketKey, Counts

PREFIX = "gpu_oncall"
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
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

    def family(self) -> HistogramMetricFamily:
        """The histogram as `prometheus_client` writes it: cumulative buckets, sum and count."""
        family = HistogramMetricFamily(self.name, self.help, labels=list(self.labelnames))
        les = [_le(bound) for bound in self.bounds] + ["+Inf"]
        for labels, series in sorted(self.series.items()):
            if sum(series.buckets) == 0:
                continue  # every incident of this label set moved to another one
            cumulative, buckets = 0, []
            for le, count in zip(les, series.buckets, strict=True):
                cumulative += count
                buckets.append((le, float(cumulative)))
            family.add_metric(list(labels), buckets, series.micros / 1_000_000)
        return family


class BotCollector(Collector):
    """The process counters and the incidents by state, from one snapshot of each."""

    def __init__(
        self,
        counters: IntakeCounters,
        *,
        by_state: Mapping[str, int],
    ) -> None:
        self.counters = counters
        self.by_state = by_state

    def collect(self) -> Iterator[Metric]:
        plain, webhooks, triage = self.counters.snapshot()
        for name, help_text in COUNTERS.items():
            yield CounterMetricFamily(f"{PREFIX}_{name}", help_text, value=plain.get(name, 0))
        yield _labelled(
            CounterMetricFamily(
                f"{PREFIX}_webhooks_total",
                "POST /alerts requests by HTTP status code.",
                labels=["code"],
            ),
            sorted(webhooks.items()),
        )
        yield _labelled(
            CounterMetricFamily(
                f"{PREFIX}_triage_runs_total",
                "Triage runs by outcome (queued, deferred, waiting, completed, "
                "awaiting_approval, failed, not_started).",
                labels=["outcome"],
            ),
            sorted(triage.items()),
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_triage_queue_depth",
            "Triage runs waiting for a worker.",
            value=self.counters.queue_depth,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_leader",
            "1 while this process is the leader running the periodic jobs, else 0.",
            value=self.counters.leader,
        )
        yield _labelled(
            GaugeMetricFamily(f"{PREFIX}_incidents", "Incidents by state.", labels=["state"]),
            [(s.value, self.by_state.get(s.value, 0)) for s in IncidentState],
        )


class HistogramCollector(Collector):
    """The MTTR histograms as `prometheus_client` families."""

    def __init__(self, histograms: Iterable[Histogram]) -> None:
        self.histograms = list(histograms)

    def collect(self) -> Iterator[Metric]:
        for histogram in self.histograms:
            yield histogram.family()


def render_metrics(
    counters: IntakeCounters, *, by_state: Mapping[str, int], histograms: Iterable[Histogram]
) -> str:
    """The whole exposition (text format 0.0.4): process counters, incident gauges and the
    MTTR histograms."""
    return _render(BotCollector(counters, by_state=by_state)) + _render(
        HistogramCollector(histograms)
    )


def _render(collector: Collector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


class _HistogramText:
    """The histograms' exposition, kept per family (one per figure) for the bucket rows last
    read. `prometheus_client` writes a sample ~20x slower than a format string (it validates and
    escapes every label name), and a change of incidents touches few figures, so a scrape
    re-renders only the families whose rows changed."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[BucketKey, tuple[int, int]]] = {}
        self._text: dict[str, str] = {}

    def get(self, counts: Counts) -> str:
        by_figure: dict[str, dict[BucketKey, tuple[int, int]]] = {}
        for key, value in figures.without_states(counts).items():
            by_figure.setdefault(key[0], {})[key] = value
        parts = []
        for name in _empty_histograms():
            rows = by_figure.get(name, {})
            if name not in self._text or rows != self._rows.get(name):
                self._text[name] = _render(HistogramCollector([_counted(rows)[name]]))
                self._rows[name] = rows
            parts.append(self._text[name])
        return "".join(parts)


@dataclass(frozen=True)
class _Scraped:
    version: int
    by_state: Mapping[str, int]
    histograms: str


class _ScrapeCache:
    """What the last scrape of each database read, keyed by the buckets' version: a scrape whose
    version is the one last seen reads that one row and renders only the process counters, so
    its cost depends neither on the incidents nor on the series. Per engine (weakly held), so
    two databases in one process never share an entry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: weakref.WeakKeyDictionary[Engine, _Scraped] = weakref.WeakKeyDictionary()
        self._histograms: weakref.WeakKeyDictionary[Engine, _HistogramText] = (
            weakref.WeakKeyDictionary()
        )

    def read(self, db: Engine) -> tuple[Mapping[str, int], str]:
        with self._lock, read_scope(db) as session:  # one snapshot, no write lock
            version = figures.read_version(session)
            last = self._last.get(db)
            if last is not None and version is not None and last.version == version:
                return last.by_state, last.histograms
            counts = figures.read_counts(session)  # read after the version: never older
            by_state = figures.state_counts(counts)
            text = self._histograms.setdefault(db, _HistogramText()).get(counts)
            if version is not None:
                self._last[db] = _Scraped(version, by_state, text)
            return by_state, text


_CACHE = _ScrapeCache()


def scrape(db: Engine, counters: IntakeCounters) -> str:
    """What `GET /metrics` serves: the buckets' version, then (only when it moved) the
    maintained rows (incidents by state and the histogram buckets), whatever the number of
    incidents."""
    by_state, histograms = _CACHE.read(db)
    return _render(BotCollector(counters, by_state=by_state)) + histograms


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
    return list(_counted(counts).values())


def _counted(counts: Counts) -> dict[str, Histogram]:
    histograms = _empty_histograms()
    for (figure, runbook, layer, severity, index), (n, micros) in figures.without_states(
        counts
    ).items():
        labels = (runbook, layer, metric_severity(severity))
        histograms[figure].add(labels, index, observations=n, micros=micros)
    return histograms


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
        labels = (view.runbook, view.layer or UNDIAGNOSED, metric_severity(view.severity))
        if view.gpu_hours_lost is not None:
            lost = timedelta(hours=view.gpu_hours_lost)  # GPU-seconds, as the buckets
            histograms[LOST_GPU_SECONDS].observe(labels, lost)
        for d in DEFINITIONS:
            value: timedelta | None = getattr(figures, d.name)
            if value is not None:
                histograms[d.name].observe(labels, value)
    return list(histograms.values())


def _labelled(
    family: CounterMetricFamily | GaugeMetricFamily, samples: Iterable[tuple[str, float]]
) -> Metric:
    for value, n in samples:
        family.add_metric([value], n)
    return family


def _le(bound: float) -> str:
    """A bucket's upper bound as its `le` label (`60`, `0.5`), as before this module."""
    return str(int(bound)) if float(bound).is_integer() else repr(float(bound))

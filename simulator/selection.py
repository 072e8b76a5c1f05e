"""A signal's series, selected once and evaluated at any number of times (SimTelemetry's work).

`Selection.of` picks the metric's tracks for a query and applies every filter that does not
depend on time once: the label matchers, the host label (a track's own node, among the asked
nodes) and the workload label. `Selection.at(times)` then evaluates them at each time: a track
without effects in closed form for every time in one pass, one with effects through a memo of
its samples (neighbouring points' windows share most of their scrape times). A joined signal
(`* on(...) group_left(...)`) filters per time, since which info series exist changes with
time, but only over the info series whose keys a selected track carries.

At each time the answer is exactly what evaluating that time alone gives, the old per-point
definition (tests/simulator/test_range_reads.py checks it on generated fleets).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from integrations.signals import LabelJoin, SignalSpec
from integrations.telemetry import SignalQuery
from simulator.fleet import Fleet
from simulator.tracks import Computed, Effect, SampleGrid, Track, evaluate, evaluate_linear

Group = tuple[str, tuple[tuple[str, str], ...]]
"""A sample identity: its node and its identity labels."""


class Identity:
    """A sample identity as one shared object: equal groups are the same Identity (`interned`),
    so a read keys its samples by the object (a pointer's hash) instead of hashing the node and
    every label pair again, and each identity's labels dict is built once. A sample's labels
    are read-only, as every consumer treats them."""

    __slots__ = ("__weakref__", "group", "labels", "node")

    def __init__(self, group: Group) -> None:
        self.group = group
        self.node = group[0]
        self.labels = dict(group[1])


_IDENTITIES: weakref.WeakValueDictionary[Group, Identity] = weakref.WeakValueDictionary()
_INTERNING = threading.Lock()
"""One Identity per group while any is held (a track's memo, a read's answer): two reads in
two threads must never make two for one group, or a read would split an identity in two."""


def interned(group: Group) -> Identity:
    """The Identity of `group`: the one already held, else a new one."""
    found = _IDENTITIES.get(group)
    if found is None:
        with _INTERNING:
            found = _IDENTITIES.get(group)
            if found is None:
                found = _IDENTITIES[group] = Identity(group)
    return found


def _remember(memo: tuple[Any, ...] | None, key: Any, group: Identity) -> tuple[Any, ...]:
    """A track's memo (`Track.group`) with (`key`, `group`) first and the newest pair it held
    second: a track remembers two ways of being grouped, so a metric that two signals read by
    different identity labels (the XID gauge: the last XID by GPU, its changes) is grouped once
    for each, not again on every read (a 4,096-member storm interned 65,000 groups per run)."""
    return (key, group) if memo is None else (key, group, memo[0], memo[1])


Column = list[tuple[float, float] | None]
"""A track's `evaluate` result at each time of a read."""
Values = dict[Group, list[float | None]]
"""Each sample identity's value at each time of a read (None: no sample then)."""
AGGREGATE: dict[str, Callable[[list[float]], float]] = {
    # how samples that share an identity combine (`agg by (...)`)
    "max": max,
    "min": min,
    "sum": math.fsum,
    "avg": lambda values: math.fsum(values) / len(values),
    "count": lambda values: float(len(values)),
}


@dataclass(frozen=True, slots=True)
class Labels:
    """Where a source keeps its host and its workload."""

    host: str
    workload: str


class Selection:
    """One query's tracks, filtered once; evaluate with `at`."""

    def __init__(
        self,
        spec: SignalSpec,
        query: SignalQuery,
        *,
        tracks: list[Track],
        labels: Labels,
        joins: list[list[Track]],
    ) -> None:
        self._spec = spec
        self._query = query
        self._tracks = tracks
        self._labels = labels
        self._joins = joins
        self._fn = "rate" if spec.fn == "quantile" else spec.fn
        self._identity = spec.identity_labels
        self._nodes = set(query.nodes) if query.nodes else None
        self._by_workload = spec.selects_by_workload and query.workload is not None
        self._window = query.window.total_seconds()
        self._grids: list[SampleGrid] = []
        self._columns: dict[int, Column] = {}
        self._lines: dict[tuple[float, float, float, float], Column] = {}
        """Columns of tracks without effects, by baseline (with the signs of zeros)."""

    @classmethod
    def of(
        cls,
        fleet: Fleet,
        spec: SignalSpec,
        query: SignalQuery,
        *,
        wanted: list[str] | None,
        labels: Labels,
    ) -> Selection:
        """Select the query's tracks: its nodes (`wanted`, or the asked nodes of a signal that
        selects by workload) and its workload's pods, then what no time changes."""
        by_workload = spec.selects_by_workload
        scope = wanted if not by_workload else (list(query.nodes) or None)
        pods_of = query.workload if by_workload else None
        match = tuple(spec.match.items())
        tracks = [
            t
            for t in fleet.tracks(spec.series_metric, scope, workload=pods_of)
            if not match or all(t.labels.get(k) == v for k, v in match)
        ]
        selection = cls(spec, query, tracks=tracks, labels=labels, joins=[])
        if not spec.joins:
            selection._tracks = [t for t in tracks if selection._kept(t.labels, t)]
            return selection
        join_workload = query.workload if by_workload and query.workload is not None else None
        for join in spec.joins:
            needed = {_key(t.labels, join) for t in tracks}
            selection._joins.append(
                [
                    t
                    for t in fleet.tracks(join.metric, workload=join_workload)
                    if _key(t.labels, join) in needed
                ]
            )
        return selection

    def at_one(self, time: float) -> dict[Identity, float | None]:
        """Each sample identity's value at `time` (fleet seconds), before `scale` (None: no
        sample), in the order the tracks find them (an instant read's samples)."""
        self._grids = [SampleGrid.over(start=time - self._window, end=time)]
        self._columns, self._lines = {}, {}
        return self._one_time(0, self._grids[0])

    def at(self, times: Sequence[float]) -> Values:
        """Each sample identity's value at each of `times` (fleet seconds), before `scale`
        (None: no sample then), in no particular order."""
        self._grids = [SampleGrid.over(start=t - self._window, end=t) for t in times]
        self._columns, self._lines = {}, {}
        if len(times) == 1 or self._spec.joins or self._spec.fn == "quantile":
            return self._per_time()
        if any(t.value_labels is not None for t in self._tracks):
            return self._per_time()
        return self._static()

    def _kept(self, labels: Mapping[str, str], track: Track) -> bool:
        node = labels.get(self._labels.host)
        if node is None or node != track.node:
            return False
        if self._nodes is not None and node not in self._nodes:
            return False
        return not self._by_workload or labels.get(self._labels.workload) == self._query.workload

    def _group(self, node: str, labels: Mapping[str, str]) -> Identity:
        return interned((node, tuple([(k, labels[k]) for k in self._identity if k in labels])))

    def _valued_group(self, track: Track, last: float) -> Identity:
        """`_group` of the labels the track exports with `last` (the XID gauge's `err_code`),
        kept on the track while reads group it by the same identity labels and find the same
        value (a zero's sign too): a healthy GPU's XID is 0 read after read."""
        memo = track.group
        if memo is not None:
            if self._valued_fits(memo[0], last):
                return memo[1]  # type: ignore[no-any-return]
            if len(memo) > 2 and self._valued_fits(memo[2], last):
                return memo[3]  # type: ignore[no-any-return]
        group = self._group(track.node, track.labels_for(last))
        track.group = _remember(memo, (self._identity, last), group)
        return group

    def _valued_fits(self, key: tuple[Any, float], last: float) -> bool:
        """Whether a `_valued_group` memo key is this read's identity labels and `last`."""
        identity, seen = key
        return (
            seen == last
            and math.copysign(1.0, seen) == math.copysign(1.0, last)
            and (identity is self._identity or identity == self._identity)
        )

    def _own_group(self, track: Track) -> Identity:
        """`_group` of the track's own labels, kept on the track for the next reads that group
        by the same identity labels (a track's labels never change)."""
        memo = track.group  # two pairs at most (`_remember`), checked without a loop: hot
        if memo is not None:
            if memo[0] is self._identity or memo[0] == self._identity:
                return memo[1]  # type: ignore[no-any-return]
            if len(memo) > 2 and (memo[2] is self._identity or memo[2] == self._identity):
                return memo[3]  # type: ignore[no-any-return]
        group = self._group(track.node, track.labels)
        track.group = _remember(memo, self._identity, group)
        return group

    def _static(self) -> Values:
        """Labels fixed in time, several times: each identity's tracks are known once, so each
        identity's values are combined column by column."""
        by_group: dict[Identity, list[Column]] = {}
        shared: dict[tuple[Effect, ...], Column] = {}
        for i, track in enumerate(self._tracks):
            group = self._own_group(track)
            by_group.setdefault(group, []).append(self._shared(i, shared))
        combine, single = AGGREGATE[self._spec.agg], self._spec.agg != "count"
        out: Values = {}
        alone: dict[int, list[float | None]] = {}  # a column shared by tracks: its values once
        for group, columns in by_group.items():
            if len(columns) == 1 and single:
                column = columns[0]
                own = alone.get(id(column))
                if own is None:
                    own = alone[id(column)] = [None if r is None else r[0] for r in column]
                out[group.group] = own
                continue
            values: list[float | None] = []
            for results in zip(*columns, strict=True):
                found = [r[0] for r in results if r is not None]
                if not found:
                    values.append(None)
                elif single and len(found) == 1:
                    values.append(found[0])
                else:
                    values.append(combine(found))
            out[group.group] = values
        return out

    def _per_time(self) -> Values:
        """Labels that change with time (joins, a value's labels) or a histogram: each time
        on its own, over the tracks selected once."""
        out: Values = {}
        for at, grid in enumerate(self._grids):
            for identity, value in self._one_time(at, grid).items():
                out.setdefault(identity.group, [None] * len(self._grids))[at] = value
        return out

    def _one_time(self, at: int, grid: SampleGrid) -> dict[Identity, float | None]:
        spec = self._spec
        joins = zip(spec.joins, self._joins, strict=True)
        indexes = [_index(join, tracks, at=grid.end) for join, tracks in joins]
        quantile = spec.fn == "quantile"
        values: dict[Identity, float] = {}
        shared_by: dict[Identity, list[float]] = {}
        buckets: dict[Identity, dict[float, float]] = {}
        shared: dict[tuple[Effect, ...], Column] = {}
        once: dict[tuple[Effect, ...], tuple[float, float] | None] = {}
        single_time = len(self._grids) == 1
        for i, track in enumerate(self._tracks):
            labels = track.labels
            if indexes:
                joined = join_labels(labels, joins=spec.joins, indexes=indexes)
                if joined is None or not self._kept(joined, track):
                    continue
                labels = joined
            if not single_time:
                one = self._shared(i, shared)[at]
            elif track.effects:
                one = self._once(track, grid, once)
            else:  # the healthy majority, without a call more
                one = evaluate(track, self._fn, grid=grid)
            if one is None:
                continue
            value, last = one
            if track.value_labels is not None and quantile:  # `le` read from them below
                labels = track.labels_for(last)
                key = self._group(track.node, labels)
            elif track.value_labels is not None:
                key = self._valued_group(track, last)
            elif labels is track.labels:
                key = self._own_group(track)
            else:
                key = self._group(track.node, labels)
            if quantile:
                per_le = buckets.setdefault(key, {})
                le = float(labels.get("le", "nan"))
                per_le[le] = per_le.get(le, 0.0) + value
                continue
            if key in values:  # a second series of the identity: combined below
                shared_by.setdefault(key, [values[key]]).append(value)
            else:
                values[key] = value  # the usual one series per identity, without a list
        if quantile:
            q = spec.quantile or 0.5
            return {key: histogram_quantile(q, per_le) for key, per_le in buckets.items()}
        combine, single = AGGREGATE[spec.agg], spec.agg != "count"
        if single and not shared_by:
            return dict(values)
        return {
            key: combine(shared_by[key])
            if key in shared_by
            else (value if single else combine([value]))
            for key, value in values.items()
        }

    def _shared(self, i: int, shared: dict[tuple[Effect, ...], Column]) -> Column:
        """Track `i`'s column, once per distinct model reading (see `_by_model`)."""
        track = self._tracks[i]
        if not _by_model(track):
            return self._column(i)
        column = shared.get(track.effects)
        if column is None:
            column = shared[track.effects] = self._column(i)
        return column

    def _once(
        self,
        track: Track,
        grid: SampleGrid,
        shared: dict[tuple[Effect, ...], tuple[float, float] | None],
    ) -> tuple[float, float] | None:
        """`evaluate` at one time (an instant read), once per distinct model reading."""
        if not _by_model(track):
            return evaluate(track, self._fn, grid=grid)
        if track.effects not in shared:
            shared[track.effects] = evaluate(track, self._fn, grid=grid)
        return shared[track.effects]

    def _column(self, i: int) -> Column:
        """Track `i`'s `evaluate` at each time: in closed form for a track without effects
        (once per baseline: healthy series of a kind often share theirs), else through a memo
        of its samples."""
        column = self._columns.get(i)
        if column is None:
            track = self._tracks[i]
            if not track.effects:
                base, slope = track.base, track.slope
                line = (base, slope, math.copysign(1.0, base), math.copysign(1.0, slope))
                column = self._lines.get(line)
                if column is None:
                    column = self._lines[line] = list(
                        evaluate_linear(track, self._fn, grids=self._grids)
                    )
            else:
                read = _Samples(track).__getitem__
                column = [evaluate(track, self._fn, grid=g, value=read) for g in self._grids]
            self._columns[i] = column
        return column


def _by_model(track: Track) -> bool:
    """Whether a model computes the track's value (`Computed`), so it does not depend on its
    baseline: tracks with equal effects (a node's GPUs reading its training job through one
    shared reader) share the first one's evaluation. The key is the effects themselves
    (Computed compares by its reader's identity), never bare ids."""
    return (
        bool(track.effects)
        and track.value_labels is None
        and any(isinstance(e, Computed) for e in track.effects)
    )


class _Samples(dict[float, float | None]):
    """A track's value at each time asked, read once per time."""

    def __init__(self, track: Track) -> None:
        super().__init__()
        self._track = track

    def __missing__(self, t: float) -> float | None:
        value = self[t] = self._track.value(t)
        return value


def _key(labels: Mapping[str, str], join: LabelJoin) -> tuple[str, ...]:
    return tuple(labels.get(k, "") for k in join.keys)


def _index(
    join: LabelJoin, tracks: list[Track], *, at: float
) -> dict[tuple[str, ...], dict[str, str]]:
    """The join metric's series present at `at`, keyed by the join keys (the last wins)."""
    index: dict[tuple[str, ...], dict[str, str]] = {}
    for track in tracks:
        if track.value(at) is not None:
            index[_key(track.labels, join)] = {
                k: track.labels[k] for k in join.labels if k in track.labels
            }
    return index


def join_labels(
    labels: dict[str, str],
    *,
    joins: tuple[LabelJoin, ...],
    indexes: list[dict[tuple[str, ...], dict[str, str]]],
) -> dict[str, str] | None:
    """`labels` with each join's labels from its index, or None where a join has no partner
    (PromQL's `* on(...) group_left(...)` drops the series)."""
    out = dict(labels)
    for join, index in zip(joins, indexes, strict=True):
        extra = index.get(_key(labels, join))
        if extra is None:
            return None
        out.update(extra)
    return out


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """Prometheus' `histogram_quantile` over cumulative bucket rates keyed by `le` (None where
    PromQL gives NaN: no +Inf bucket, or no observations)."""
    items = sorted((le, count) for le, count in buckets.items() if not math.isnan(le))
    if not items or not math.isinf(items[-1][0]) or items[-1][1] <= 0:
        return None
    rank = q * items[-1][1]
    lower, below = 0.0, 0.0
    for i, (le, count) in enumerate(items):
        if count >= rank:
            if math.isinf(le):
                return items[i - 1][0] if i > 0 else None
            if i == 0 and le <= 0:
                return le
            inside = count - below
            return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = le, count
    return None

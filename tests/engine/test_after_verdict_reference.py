"""The evidence snapshot's pure parts against the code they replaced (kept here as references):
`select_series` (now one pass over the read, each step's time converted once) and `find_onset`
(now skipping the peers' spread when no point can cross the threshold's floor) give exactly
what the old code gave, on generated reads and plans.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.engine.snapshotting import (
    MAX_CULPRIT_SERIES,
    MAX_SIBLINGS,
    SnapshotPlan,
    find_onset,
    select_series,
)
from integrations.telemetry import SeriesPoints

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NODES = ("n0", "n1", "n2", "n3", "n4")
GPUS = ("0", "1", "2", "3")


def reference_select_series(
    plan: SnapshotPlan, found: Sequence[SeriesPoints]
) -> list[dict[str, Any]]:
    on_culprit = [s for s in found if s.node in plan.culprits and s.points]
    if plan.gpu is None:
        chosen = [(s, "culprit") for s in on_culprit[:MAX_CULPRIT_SERIES]]
    else:
        named = [s for s in on_culprit if s.labels.get("gpu") == plan.gpu]
        others = [s for s in on_culprit if s.labels.get("gpu") != plan.gpu]
        chosen = [(s, "culprit") for s in named[:MAX_CULPRIT_SERIES] or on_culprit[:1]]
        chosen += [(s, "peer") for s in others[:MAX_SIBLINGS] if named]
    seen: set[str] = set()
    for s in found:
        if s.node in plan.peers and s.node not in seen and s.points:
            seen.add(s.node)
            chosen.append((s, "peer"))
    return [
        {
            "node": s.node,
            "role": role,
            "labels": dict(s.labels),
            "points": [[round(at.timestamp(), 3), value] for at, value in s.points],
        }
        for s, role in chosen
    ]


def reference_find_onset(series: Sequence[Mapping[str, Any]]) -> float | None:
    culprit = next((s for s in series if s["role"] == "culprit"), None)
    if culprit is None or len(culprit["points"]) < 2:
        return None
    peer_values = [p[1] for s in series if s["role"] == "peer" for p in s["points"]]
    spread = statistics.pstdev(peer_values) if len(peer_values) > 1 else 0.0
    base = culprit["points"][0][1]
    threshold = max(3 * spread, 0.1 * abs(base), 1e-9)
    return next((t for t, v in culprit["points"] if abs(v - base) > threshold), None)


values = st.one_of(
    st.sampled_from([0.0, 1.0, 2.5, -3.0]),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
)
instants = st.builds(
    lambda ms: T0 + timedelta(milliseconds=ms), st.integers(min_value=0, max_value=10**7)
)
points = st.lists(st.tuples(instants, values), max_size=6).map(tuple)
labels = st.fixed_dictionaries({}, optional={"gpu": st.sampled_from(GPUS), "UUID": st.just("u")})
reads = st.lists(st.builds(SeriesPoints, node=st.sampled_from(NODES), labels=labels,
                           points=points), max_size=12)  # fmt: skip
plans = st.builds(
    SnapshotPlan,
    signal=st.just("gpu.ecc.dbe_rate"),
    culprits=st.lists(st.sampled_from(NODES), min_size=1, max_size=2, unique=True).map(tuple),
    peers=st.lists(st.sampled_from(NODES), max_size=3, unique=True).map(tuple),
    gpu=st.one_of(st.none(), st.sampled_from(GPUS)),
)


@settings(max_examples=150, deadline=None)
@given(plan=plans, found=reads)
def test_select_series_is_the_reference_on_generated_reads(
    plan: SnapshotPlan, found: list[SeriesPoints]
) -> None:
    assert select_series(plan, found) == reference_select_series(plan, found)


stored_points = st.lists(st.tuples(st.floats(0, 2e9), values).map(list), max_size=8)
stored = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["culprit", "peer"]), "points": stored_points}
    ),
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(series=stored)
def test_find_onset_is_the_reference_on_generated_series(series: list[dict[str, Any]]) -> None:
    assert find_onset(series) == reference_find_onset(series)

"""`/metrics` reads one row when nothing changed (bot/serving/exposition.py, the buckets'
version in storage/figures.py) and re-renders only the histogram families whose rows changed.

Covers: a second scrape with no change runs exactly one SELECT and serves the same text; an
incident changed by another engine on the same database (another replica) is seen by the next
scrape, which equals the from-scratch render byte for byte; a rebuild keeps the version moving
forward; and over generated sequences of bucket rows the per-family cache writes the same text
as rendering every histogram afresh.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.incidents import figures
from bot.incidents.opening import OpenRequest, open_or_attach_many
from bot.intake.counters import IntakeCounters
from bot.serving import exposition
from bot.serving.exposition import counted_histograms, render_metrics, scrape
from storage.db import create_schema, make_engine, session_scope
from storage.figures import BucketKey

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def open_incidents(engine: Engine, nodes: list[str], *, runbook: str = "ecc-storm") -> None:
    requests = [
        OpenRequest(runbook, node, "node", "critical", "t", T0 - timedelta(minutes=n + 1))
        for n, node in enumerate(nodes)
    ]
    with session_scope(engine) as session:
        open_or_attach_many(session, requests, detected_at=T0, actor="alertmanager")


def from_scratch(engine: Engine, counters: IntakeCounters) -> str:
    with session_scope(engine) as session:
        counts = figures.read_counts(session)
    by_state = figures.state_counts(counts)
    return render_metrics(counters, by_state=by_state, histograms=counted_histograms(counts))


class Statements:
    """The SQL statements an engine runs while counting."""

    def __init__(self, engine: Engine) -> None:
        self.seen: list[str] = []
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *args: Any) -> None:
        self.seen.append(str(args[2]))


def test_an_unchanged_database_costs_one_select(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    open_incidents(engine, ["gpu-node-01", "gpu-node-02"])
    counters = IntakeCounters()
    first = scrape(engine, counters)
    statements = Statements(engine)
    second = scrape(engine, counters)
    selects = [s for s in statements.seen if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1 and "figure_buckets" in selects[0], statements.seen
    assert second == first == from_scratch(engine, counters)
    engine.dispose()


def test_a_change_by_another_replica_is_served_by_the_next_scrape(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'oncall.db'}"
    serving, other = make_engine(url), make_engine(url)
    create_schema(serving)
    open_incidents(serving, ["gpu-node-01"])
    counters = IntakeCounters()
    before = scrape(serving, counters)
    open_incidents(other, ["gpu-node-02", "gpu-node-03"], runbook="nccl-hang")
    after = scrape(serving, counters)
    assert after != before
    assert after == from_scratch(serving, counters)
    assert 'gpu_oncall_incidents{state="open"} 3.0' in after
    serving.dispose()
    other.dispose()


def test_a_rebuild_moves_the_version_forward(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    open_incidents(engine, ["gpu-node-01"])
    with session_scope(engine) as session:
        version = figures.read_version(session)
        figures.rebuild(session)
    with session_scope(engine) as session:
        assert (figures.read_version(session) or 0) > (version or 0) > 0
        assert figures.read_counts(session) == figures.from_scratch(session)
    engine.dispose()


FIGURES = list(exposition._empty_histograms())
rows = st.dictionaries(
    st.tuples(
        st.sampled_from(FIGURES),
        st.sampled_from(["ecc-storm", "nccl-hang"]),
        st.sampled_from(["gpu_hardware", "fabric"]),
        st.sampled_from(["critical", "warning", "sev-x"]),
        st.integers(0, 3),
    ),
    st.tuples(st.integers(0, 50), st.integers(0, 10**9)),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(st.lists(rows, min_size=1, max_size=5))
def test_the_family_cache_writes_what_a_fresh_render_writes(
    sequence: list[dict[BucketKey, tuple[int, int]]],
) -> None:
    cache = exposition._HistogramText()
    for counts in sequence:
        fresh = exposition._render(exposition.HistogramCollector(counted_histograms(counts)))
        assert cache.get(counts) == fresh

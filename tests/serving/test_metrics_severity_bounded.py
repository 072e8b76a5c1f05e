"""`/metrics` stays bounded whatever `severity` values alerts carry (issue 20): the label keeps
the known severities and counts every other one under `other`.

Covers: incidents opened with hundreds of free-form severities add no series past the bounded
set (the exposition has as many lines as with the known severities alone), their observations
are all counted (under `other`), and the exposition parses as Prometheus text.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import Engine

from bot.incidents.opening import OpenRequest, open_or_attach_many
from bot.intake.counters import IntakeCounters
from bot.limits import METRIC_SEVERITIES, OTHER_SEVERITY
from bot.serving.exposition import scrape
from storage.db import create_schema, make_engine, session_scope

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def database(tmp_path: Path, severities: list[str]) -> Engine:
    """A database with one open incident per severity, each fired a minute before detection
    (so each has a time to detect in the histograms)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(engine)
    requests = [
        OpenRequest(
            "ecc-storm", f"gpu-node-{n:04d}", "node", severity, "t", T0 - timedelta(minutes=1)
        )
        for n, severity in enumerate(severities)
    ]
    with session_scope(engine) as session:
        open_or_attach_many(session, requests, detected_at=T0, actor="alertmanager")
    return engine


def severity_counts(text: str) -> dict[str, float]:
    """`severity` label -> observations, over the time-to-detect histogram's `_count` series."""
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_count") and "severity" in sample.labels:
                key = sample.labels["severity"]
                counts[key] = max(counts.get(key, 0.0), sample.value)
    return counts


def test_free_form_severities_share_one_other_series(tmp_path: Path) -> None:
    known = list(METRIC_SEVERITIES) + ["bogus"]
    free = [f'sev-{n}<>"\\' for n in range(400)]
    small = scrape(database(tmp_path / "a", known), IntakeCounters())
    large = scrape(database(tmp_path / "b", known + free), IntakeCounters())

    assert small.count("\n") == large.count("\n"), "free-form severities added series"
    counts = severity_counts(large)
    assert set(counts) == {*METRIC_SEVERITIES, OTHER_SEVERITY}
    assert counts[OTHER_SEVERITY] == 1 + len(free), "every observation is still counted"
    assert all(counts[s] == 1 for s in METRIC_SEVERITIES)

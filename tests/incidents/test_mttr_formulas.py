"""MTTR figures.

Covers: each figure's formula (all from fired_at except time to diagnosis, from detected_at);
missing timestamps give None; out-of-order timestamps raise a ValueError naming both;
`format_duration` output; the published formula table in the module docstring matches the
definitions.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.incidents import mttr
from bot.incidents.mttr import (
    DEFINITIONS,
    MttrFigures,
    TimestampOrderError,
    compute_figures,
    format_duration,
)

FIRED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return FIRED + timedelta(minutes=minutes)


def test_each_figure_follows_its_published_formula() -> None:
    figures = compute_figures(
        fired_at=FIRED,
        detected_at=at(1),
        acknowledged_at=at(4),
        diagnosed_at=at(1.5),
        mitigated_at=at(20),
        resolved_at=at(45),
    )
    assert figures == MttrFigures(
        mttd=timedelta(minutes=1),
        mtta=timedelta(minutes=4),
        time_to_diagnosis=timedelta(seconds=30),  # from detected_at, not fired_at
        mttm=timedelta(minutes=20),
        mttr=timedelta(minutes=45),
    )
    assert figures.as_seconds() == {
        "mttd": 60.0,
        "mtta": 240.0,
        "time_to_diagnosis": 30.0,
        "mttm": 1200.0,
        "mttr": 2700.0,
    }


def test_missing_timestamps_give_unknown_figures() -> None:
    figures = compute_figures(
        fired_at=None,
        detected_at=at(1),
        acknowledged_at=None,
        diagnosed_at=at(2),
        mitigated_at=None,
        resolved_at=at(10),
    )
    assert figures == MttrFigures(time_to_diagnosis=timedelta(minutes=1))


@pytest.mark.parametrize(
    ("stamps", "earlier", "later"),
    [
        ({"detected_at": at(-1)}, "fired_at", "detected_at"),
        ({"resolved_at": at(5), "mitigated_at": at(10)}, "mitigated_at", "resolved_at"),
        ({"detected_at": at(2), "diagnosed_at": at(1)}, "detected_at", "diagnosed_at"),
        ({"acknowledged_at": at(-3)}, "fired_at", "acknowledged_at"),
    ],
)
def test_out_of_order_timestamps_name_both(
    stamps: dict[str, datetime], earlier: str, later: str
) -> None:
    kwargs: dict[str, datetime | None] = {
        "fired_at": FIRED,
        "detected_at": None,
        "acknowledged_at": None,
        "diagnosed_at": None,
        "mitigated_at": None,
        "resolved_at": None,
    }
    kwargs.update(stamps)
    with pytest.raises(TimestampOrderError) as info:
        compute_figures(**kwargs)
    assert isinstance(info.value, ValueError)
    assert (info.value.earlier, info.value.later) == (earlier, later)
    assert f"{later} (" in str(info.value) and f"is before {earlier}" in str(info.value)


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(minutes=2, seconds=14), "2m 14s"),
        (timedelta(hours=1, seconds=5), "1h 5s"),
        (timedelta(days=3, hours=4, seconds=9), "3d 4h"),
        (timedelta(milliseconds=150), "150ms"),
        (timedelta(0), "0s"),
        (timedelta(seconds=59.6), "1m"),
        (-timedelta(seconds=90), "-1m 30s"),
        (None, "n/a"),
    ],
)
def test_format_duration(td: timedelta | None, text: str) -> None:
    assert format_duration(td) == text


def test_the_docstring_table_publishes_every_formula() -> None:
    assert mttr.__doc__ is not None
    for definition in DEFINITIONS:
        assert definition.formula in mttr.__doc__

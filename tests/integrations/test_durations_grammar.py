"""One duration grammar for the whole bot (integrations/durations.py): Prometheus's.

Covers: the forms people write in runbooks, scenarios, Slack and the CLI parse to the same
timedelta; what is not a duration is refused with the text quoted and the grammar shown; for any
duration, rendering and parsing again gives it back; for any text, parsing gives a duration or
`InvalidDuration`, never another exception.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from integrations.durations import (
    PATTERN,
    InvalidDuration,
    format_duration,
    parse_duration,
    parse_offset,
    render_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("15m", timedelta(minutes=15)),
        ("1h30m", timedelta(minutes=90)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("500ms", timedelta(milliseconds=500)),
        ("1y", timedelta(days=365)),
        (" 30s ", timedelta(seconds=30)),
        (90, timedelta(seconds=90)),
    ],
)
def test_prometheus_forms_parse(text: str | int, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "10 min", "1.5h", "30m1h", "1h1h", "-5m", "5x", "m"])
def test_what_is_not_a_duration_is_refused_with_the_text_and_the_grammar(text: str) -> None:
    with pytest.raises(InvalidDuration) as exc:
        parse_duration(text)
    assert "e.g. 30s, 15m" in str(exc.value)


def test_offsets_carry_a_sign() -> None:
    assert parse_offset("-10m") == timedelta(minutes=-10)
    assert parse_offset("+2m") == parse_offset("2m") == timedelta(minutes=2)
    assert render_duration(timedelta(minutes=-10)) == "-10m"


def test_render_uses_the_largest_unit_up_to_days_that_divides() -> None:
    assert render_duration(timedelta(minutes=90)) == "90m"
    assert render_duration(timedelta(days=14)) == "14d"
    assert render_duration(timedelta(milliseconds=1500)) == "1500ms"
    assert format_duration(timedelta(minutes=2, seconds=14)) == "2m 14s"


def test_a_duration_past_a_century_is_refused() -> None:
    with pytest.raises(InvalidDuration):
        parse_duration("101y")


@given(st.integers(min_value=0, max_value=10**12))
def test_render_then_parse_gives_the_duration_back(millis: int) -> None:
    delta = timedelta(milliseconds=millis)
    assert parse_duration(render_duration(delta)) == delta


@given(st.text(max_size=40))
def test_any_text_is_a_duration_or_invalid_duration(text: str) -> None:
    try:
        parsed = parse_duration(text)
    except InvalidDuration as exc:
        assert str(exc)
    else:
        assert parsed >= timedelta(0)


def test_the_pattern_is_the_grammar() -> None:
    import re

    assert re.match(PATTERN, "1h30m") and not re.match(PATTERN, "30m1h")

"""Property tests over intake's parsers (issue 20): for arbitrary input each returns a result
or raises the project's own error with a message, never another exception.

Covers: the Alertmanager webhook model (`parse_webhook`, then `screen_alerts`) on arbitrary
bytes and on generated webhook-shaped JSON: an InvalidWebhookError naming a field, or alerts
each either taken or rejected with a reason, and every taken alert free of NUL characters and
inside the time window; the `/gpu` grammar on arbitrary text; the timestamp parser of `fired`
on arbitrary text and on any ISO time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.errors import OncallError
from bot.intake import commands as grammar
from bot.intake.alerts import InvalidWebhookError, in_window, parse_webhook, screen_alerts

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
text = st.text(max_size=30)
labels = st.dictionaries(text, text, max_size=4)
times = st.one_of(
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00Z", "0500-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]),
    text,
)
alert = st.fixed_dictionaries(
    {"status": st.sampled_from(["firing", "resolved", "x"]), "labels": labels,
     "startsAt": times},
    optional={"annotations": labels, "endsAt": times, "fingerprint": text},
)  # fmt: skip
webhook = st.fixed_dictionaries(
    {
        "version": st.sampled_from(["4", "3"]),
        "groupKey": text,
        "status": st.just("firing"),
        "receiver": text,
        "alerts": st.lists(alert, max_size=5),
    }  # fmt: skip
)


def check(body: bytes | str) -> None:
    try:
        parsed = parse_webhook(body)
    except InvalidWebhookError as exc:
        assert exc.field and str(exc).startswith("invalid Alertmanager webhook: field")
        return
    taken, rejected = screen_alerts(parsed, at=AT)
    assert len(taken) + len(rejected) == len(parsed.alerts)
    for _, one in taken:
        assert in_window(one.startsAt, at=AT)
        assert all("\0" not in k + v for k, v in one.labels.items())
    for refused in rejected:
        assert refused.reason
        assert all("\0" not in k + v for k, v in refused.stored.labels.items())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_webhook_or_one_invalid_webhook_error(body: bytes) -> None:
    check(body)


@settings(max_examples=200, deadline=None)
@given(webhook)
def test_webhook_shaped_json_is_taken_or_rejected_per_alert(body: dict[str, Any]) -> None:
    check(json.dumps(body))


def test_deeply_nested_json_is_an_invalid_webhook() -> None:
    check("[" * 100_000)
    check('{"alerts": ' + "[" * 100_000)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_command_text_parses_or_raises_our_error(line: str) -> None:
    try:
        grammar.parse_command(line)
    except OncallError as exc:
        assert str(exc)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=40), st.datetimes().map(lambda d: d.isoformat())))
def test_any_time_text_parses_or_raises_our_error(value: str) -> None:
    try:
        when = grammar.parse_when(value)
    except OncallError as exc:
        assert str(exc)
        return
    try:
        grammar.on_day_of(when, AT)
    except OncallError as exc:
        assert str(exc)

"""Property tests over the Slack payload parsers (issue 20): arbitrary payloads give a parsed
value or the project's own error, never another exception.

Covers: a button's value (`parse_button_value`, including JSON nested 100,000 deep), a click's
body (`parse_click`) of any shape, and a file message (`FileMessage`) of any shape.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.errors import UserInputError
from bot.slack.approving import parse_button_value
from bot.slack.classify import FileMessage
from bot.slack.listeners import parse_click

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_button_value_parses_or_raises_our_error(value: str) -> None:
    try:
        parse_button_value(value)
    except UserInputError as exc:
        assert str(exc)


def test_a_deeply_nested_button_value_is_our_error() -> None:
    for value in ("[" * 100_000, '{"a":' * 100_000):
        try:
            parse_button_value(value)
        except UserInputError as exc:
            assert str(exc)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["user", "container", "actions", "x"]), json_values))
def test_any_click_body_parses_or_raises_our_error(body: dict[str, Any]) -> None:
    try:
        parse_click(body)
    except UserInputError as exc:
        assert str(exc)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["channel", "ts", "files", "thread_ts"]), json_values))
def test_any_file_message_validates_or_is_a_validation_error(event: dict[str, Any]) -> None:
    try:
        FileMessage.model_validate(event)
    except ValidationError as exc:
        assert exc.errors()

"""Reporting windows (`mttr --since 7d`, `/gpu mttr 2w`): a duration of at most a year. Its own
module so a read on the command line parses one without importing the whole `/gpu` grammar
(bot/intake/commands.py re-exports it)."""

from __future__ import annotations

from datetime import timedelta

from bot.errors import UserInputError
from integrations import durations

MAX_WINDOW = timedelta(days=366)


def parse_window(text: str) -> timedelta:
    """`90m`, `24h`, `7d`, `2w` (integrations/durations.py) -> a timedelta of at most a year."""
    try:
        window = durations.parse_duration(text.strip().lower())
    except durations.InvalidDuration:
        raise UserInputError(
            f"'{text}' is not a window (a duration such as 90m, 24h, 7d, 2w)"
        ) from None
    if not timedelta(0) < window <= MAX_WINDOW:
        raise UserInputError(f"window '{text}' must be more than 0 and at most 366d")
    return window

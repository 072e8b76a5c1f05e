"""Durations: one grammar for the whole bot, Prometheus's (pure; no I/O).

A duration is one or more `<integer><unit>` parts with units in descending order, each at most
once: `y` (365 days), `w`, `d`, `h`, `m`, `s`, `ms` — `15m`, `1h30m`, `7d`, `2w`, `500ms`. The
same text is valid in a runbook (`window`, `within`, `expiry`), a scenario (`start: -10m`), a
Slack command (`/gpu mttr 7d`), the CLI (`--since 24h`), a silence and a PromQL range, so what a
person learns in one place holds in the others. Numbers (not strings) are seconds.

`render_duration` writes a duration back in the largest unit up to days that divides it (`90m`,
`14d`, `1500ms`),
which PromQL accepts and `parse_duration` reads; `format_duration` is the human form for
figures (`2m 14s`, `3d 4h`).
"""

from __future__ import annotations

import re
from datetime import timedelta

#: Units, largest first, in milliseconds.
UNITS: tuple[tuple[str, int], ...] = (
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
)
_SIZES = dict(UNITS)
#: The grammar as a regular expression (also a pydantic `pattern` for schema fields).
PATTERN = r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$"
_GRAMMAR = re.compile(PATTERN)
_PART = re.compile(r"(\d+)(ms|[ywdhms])")
#: Past this nothing the bot does makes sense, and timedelta would overflow soon after.
MAX_DURATION = timedelta(days=100 * 365)
EXAMPLES = "e.g. 30s, 15m, 1h30m, 7d, 2w"


class InvalidDuration(ValueError):
    """Text that is not a duration; the message quotes it and shows the grammar."""


def parse_duration(value: str | int | float | timedelta) -> timedelta:
    """`15m`, `1h30m`, `7d` -> timedelta (a number is seconds). Never negative."""
    if isinstance(value, timedelta):
        delta = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if value != value or abs(value) > MAX_DURATION.total_seconds():  # NaN or huge
            raise InvalidDuration(f"invalid duration {value!r} ({EXAMPLES})")
        delta = timedelta(seconds=float(value))
    else:
        text = str(value).strip()
        if not text or _GRAMMAR.match(text) is None:
            raise InvalidDuration(f"invalid duration '{value}' ({EXAMPLES})")
        millis = sum(int(n) * _SIZES[unit] for n, unit in _PART.findall(text))
        if millis > MAX_DURATION.total_seconds() * 1000:
            raise InvalidDuration(f"duration '{value}' is longer than {MAX_DURATION.days} days")
        delta = timedelta(milliseconds=millis)
    if delta < timedelta(0):
        raise InvalidDuration(f"a duration cannot be negative: '{value}'")
    return delta


def parse_offset(value: str | int | float | timedelta) -> timedelta:
    """A signed duration: `-10m` (the past), `+2m` or `2m` (the future); a number is seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        sign = -1 if value < 0 else 1
        return sign * parse_duration(abs(value))
    text = str(value).strip().replace(" ", "")
    sign = -1 if text.startswith("-") else 1
    try:
        return sign * parse_duration(text.removeprefix("-").removeprefix("+") if text else text)
    except InvalidDuration:
        raise InvalidDuration(f"invalid duration '{value}' ({EXAMPLES})") from None


def render_duration(delta: timedelta) -> str:
    """The duration in the largest unit that divides it: `15m`, `90m`, `30s`, `1500ms`; `0s`.
    Negative durations keep their sign (`-10m`), as scenario offsets need."""
    millis = round(delta.total_seconds() * 1000)
    sign, millis = ("-" if millis < 0 else ""), abs(millis)
    if millis == 0:
        return "0s"
    for unit, size in UNITS:
        if unit not in ("y", "w") and millis % size == 0:  # days read better than weeks
            return f"{sign}{millis // size}{unit}"
    raise AssertionError("unreachable: 1 ms divides every duration")


def format_duration(td: timedelta | None) -> str:
    """`2m 14s`, `1h 5s`, `3d 4h`, `150ms`, `0s`; `n/a` for None. Zero units are left out."""
    if td is None:
        return "n/a"
    if td < timedelta(0):
        return "-" + format_duration(-td)
    if timedelta(0) < td < timedelta(seconds=1):
        return f"{round(td.total_seconds() * 1000)}ms"
    seconds = round(td.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    units = [(days, "d"), (hours, "h"), (minutes, "m"), (0 if days else secs, "s")]
    parts = [f"{value}{unit}" for value, unit in units if value]
    return " ".join(parts) or "0s"

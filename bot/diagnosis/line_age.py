"""How old a kernel-log line is, from its own timestamp, and which lines are history.

A kernel log keeps every line since boot: a node whose XID 48 storm ended two days ago (and was
reset since) still carries those `Xid 48` lines. Judged by content alone they are a current GPU
fault; judged by age they are the GPU's past. Recognised timestamps, at the start of a line:
- RFC 3339 / ISO 8601, as rsyslog's high-precision file format and `journalctl -o short-iso`
  write them: `2026-11-22T10:01:02.123456+00:00 host kernel: ...` (`Z`, `+0000` too);
- the traditional syslog stamp, without a year or zone: `Nov 22 10:01:02 host kernel: ...` (read
  as UTC, as GPU nodes are run; the year is the one that puts the line no later than a day
  after `now`);
- `dmesg -T`: `[Sun Nov 22 10:01:02 2026] ...`.
A bare `dmesg` stamp (`[352811.123456]`, seconds since boot) has no wall time without the boot
time, so such a line's age is unknown: it counts as current, as before. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)(?P<tz>Z|[+-]\d{2}:?\d{2})?\s"
)
_SYSLOG = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d{2}:\d{2}:\d{2})\s")
_DMESG_T = re.compile(
    r"^\[(?:[A-Z][a-z]{2} )?(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) "
    r"(?P<hms>\d{2}:\d{2}:\d{2}) (?P<year>\d{4})\]"
)
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_ZERO_OFFSETS = frozenset({"+00:00", "-00:00", "+0000", "-0000"})
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}


@dataclass(frozen=True)
class AgedText:
    """A log split at `cutoff`: the lines to judge now, and the older ones (history)."""

    current: str
    old: tuple[tuple[datetime, str], ...]
    """Each line older than the cutoff with its time, oldest first."""
    cutoff: datetime


def line_time(line: str, *, now: datetime) -> datetime | None:
    """The wall time a line carries at its start (UTC), or None when it carries none. Each
    stamp starts with its own kind of character (`[`, an ASCII capital, a digit), so a line
    meets only the one pattern its first character allows."""
    first = line[:1]
    if first == "[":
        if found := _DMESG_T.match(line):
            return _calendar(int(found["year"]), found["mon"], found["day"], found["hms"])
        return None
    if "A" <= first <= "Z":
        if found := _SYSLOG.match(line):
            for year in (now.year, now.year - 1):
                dated = _calendar(year, found["mon"], found["day"], found["hms"])
                if dated is not None and dated <= now + timedelta(days=1):
                    return dated
        return None
    if found := _ISO.match(line):
        try:
            stamp = datetime.fromisoformat(found["ts"].replace(" ", "T"))
        except ValueError:  # `2026-02-30T25:00:00`: shaped like a stamp, but no time at all
            return None
        return _with_zone(stamp, found["tz"])
    return None


def split_by_age(text: str, *, now: datetime, lookback: timedelta) -> AgedText:
    """Lines older than `now - lookback` apart from the rest (lines without a wall time stay
    current: an unknown age is not proof of an old line)."""
    cutoff = now - lookback
    current: list[str] = []
    old: list[tuple[datetime, str]] = []
    for line in text.splitlines():
        at = line_time(line, now=now)
        if at is not None and at < cutoff:
            old.append((at, line))
        else:
            current.append(line)
    return AgedText(current="\n".join(current), old=tuple(old), cutoff=cutoff)


def describe_age(age: timedelta) -> str:
    """`2 days`, `5 hours`, `40 minutes`: how long ago, in the largest whole unit."""
    seconds = max(0, int(age.total_seconds()))
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def _with_zone(stamp: datetime, zone: str | None) -> datetime:
    if zone in _ZERO_OFFSETS:
        return stamp.replace(tzinfo=UTC)
    if not zone or zone == "Z":
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
    sign = 1 if zone[0] == "+" else -1
    digits = zone[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return (stamp - sign * offset).replace(tzinfo=UTC)


def _calendar(year: int, month: str, day: str, hms: str) -> datetime | None:
    number = _MONTHS.get(month)
    if number is None:
        return None
    hour, minute, second = (int(part) for part in hms.split(":"))
    try:
        return datetime(year, number, int(day), hour, minute, second, tzinfo=UTC)
    except ValueError:  # Feb 29 in a year without one
        return None

"""A line's wall time read the cheaper way is the time the old reading gave.

Covers: on generated lines (RFC 3339 with every zone form, syslog and `dmesg -T` stamps, bare
dmesg uptimes, impossible dates, other first characters and non-ASCII digits), `line_time`
equals the reference kept below as it was before issue 21 item 2, `None` included; an
impossible RFC 3339 date (`2026-02-30`), on which the old reading raised, is no time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.diagnosis.line_age import line_time

_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)(?P<tz>Z|[+-]\d{2}:?\d{2})?\s"
)
_SYSLOG = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d{2}:\d{2}:\d{2})\s")
_DMESG_T = re.compile(
    r"^\[(?:[A-Z][a-z]{2} )?(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) "
    r"(?P<hms>\d{2}:\d{2}:\d{2}) (?P<year>\d{4})\]"
)
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}


def reference_line_time(line: str, *, now: datetime) -> datetime | None:
    if found := _ISO.match(line):
        stamp = datetime.fromisoformat(found["ts"].replace(" ", "T"))
        return _with_zone(stamp, found["tz"])
    if found := _DMESG_T.match(line):
        return _calendar(int(found["year"]), found["mon"], found["day"], found["hms"])
    if found := _SYSLOG.match(line):
        for year in (now.year, now.year - 1):
            dated = _calendar(year, found["mon"], found["day"], found["hms"])
            if dated is not None and dated <= now + timedelta(days=1):
                return dated
    return None


def _with_zone(stamp: datetime, zone: str | None) -> datetime:
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
    except ValueError:
        return None


NOW = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
digit2 = st.integers(0, 29).map(lambda n: f"{n:02d}")
zones = st.sampled_from(["", "Z", "+00:00", "-00:00", "+0000", "-0000", "+05:30", "-0800", "+1"])
months = st.sampled_from(["Jan", "Feb", "Nov", "Dec", "Foo", "jan"])


@st.composite
def stamped_lines(draw: st.DrawFn) -> str:
    day, hour = draw(digit2), draw(digit2)
    kind = draw(st.sampled_from(["iso", "syslog", "dmesg-t", "dmesg", "other"]))
    if kind == "iso":
        sep, frac = draw(st.sampled_from(["T", " "])), draw(st.sampled_from(["", ".5", ".123456"]))
        stamp = f"2026-{draw(st.sampled_from(['02', '11', '12']))}-{day}{sep}{hour}:01:02{frac}"
        stamp += draw(zones)
    elif kind == "syslog":
        day = draw(st.sampled_from([day, day.lstrip("0") or "1"]))
        stamp = f"{draw(months)} {day} {hour}:01:02"
    elif kind == "dmesg-t":
        weekday = draw(st.sampled_from(["Sun ", ""]))
        year = draw(st.sampled_from(["2025", "2026"]))
        stamp = f"[{weekday}{draw(months)} {day} {hour}:01:02 {year}]"
    elif kind == "dmesg":
        stamp = f"[{draw(st.integers(0, 999_999))}.123456]"
    else:
        stamp = draw(st.text(max_size=6))
    rest = draw(st.sampled_from([" host kernel: NVRM: Xid", "\tx", "", "x", " ٣"]))
    return stamp + rest


@settings(max_examples=400, deadline=None)
@given(line=stamped_lines())
def test_line_time_is_what_the_old_reading_gave(line: str) -> None:
    try:
        expected = reference_line_time(line, now=NOW)
    except ValueError:  # the old reading raised on an impossible RFC 3339 date
        expected = None
    assert line_time(line, now=NOW) == expected


def test_an_impossible_rfc3339_date_is_no_time_rather_than_an_error() -> None:
    assert line_time("2026-02-30T10:01:02+00:00 host kernel: x", now=NOW) is None

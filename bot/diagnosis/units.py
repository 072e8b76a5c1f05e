"""Numbers as people on call read them: a signal's value with its unit, scaled (bus bandwidth in
GB/s, not `45000000000`), and clock-event reason bitmasks decoded by name (`96` is "SW thermal
slowdown + HW thermal slowdown"). Pure: no I/O.

Units are the `unit` strings of runbooks/signals.yaml.
"""

from __future__ import annotations

#: DCGM clock-event (throttle) reason bits, `DCGM_CLOCKS_EVENT_REASON_*` (DOMAIN §1.3).
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "GPU idle"),
    (0x2, "application clocks setting"),
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal slowdown"),
    (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake slowdown"),
    (0x100, "display clock setting"),
)

#: Byte-rate units scaled to the largest prefix below the value.
_BYTE_PREFIXES: tuple[tuple[float, str], ...] = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def decode_clock_events(mask: int) -> list[str]:
    """The names of the clock-event reason bits set in `mask` (unknown bits as hex)."""
    names = [name for bit, name in CLOCK_EVENT_BITS if mask & bit]
    known = sum(bit for bit, _ in CLOCK_EVENT_BITS)
    if mask & ~known:
        names.append(f"unknown bits {mask & ~known:#x}")
    return names


def format_plain(value: float) -> str:
    """An integer without a decimal point, else three significant digits."""
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def format_value(value: float | str | None, unit: str = "") -> str:
    """`value` with its unit as a person reads it; "n/a" for no value."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if unit == "bitmask":
        names = decode_clock_events(int(value))
        return f"{int(value):#x} ({' + '.join(names)})" if names else "0x0 (none)"
    if unit in ("B/s", "B"):
        return _bytes(value, unit)
    if unit == "ratio":
        return f"{value:.0%}"
    if unit == "C":
        return f"{format_plain(value)} °C"
    if not unit:
        return format_plain(value)
    return f"{format_plain(value)} {unit}"


def _bytes(value: float, unit: str) -> str:
    for size, prefix in _BYTE_PREFIXES:
        if abs(value) >= size:
            return f"{value / size:.3g} {prefix}{unit}"
    return f"{format_plain(value)} {unit}"


def format_reading(
    value: float | str | None, *, unit: str = "", peer_median: float | None = None, peers: int = 0
) -> str:
    """An evidence value with its unit, and the peers' median beside it when peers were read:
    `1381 MHz (peers: median 1980 MHz over 63)`."""
    text = format_value(value, unit)
    if peer_median is None or not peers:
        return text
    return f"{text} (peers: median {format_value(peer_median, unit)} over {peers})"

"""Kernel-log lines judged by their age: old fault lines are the node's history, not its fault.

A `node_logs` read is split at `now - max(window, lookback)` (`Deps.kernel_lookback`, from the
`evidence.kernel_log_lookback_hours` setting): the recent part is classified as before and
decides the layer; the older part is classified too, but only reported, as history ("last XID
48 on gpu-node-07 2 days ago"), in the step output's `history` and in the verdict's detector
notes. Lines without a wall-clock stamp count as recent (bot.diagnosis.line_age).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from bot.diagnosis.line_age import describe_age, split_by_age
from bot.diagnosis.logs import LogCatalog, classify_text

#: History rows kept per read (the newest).
MAX_HISTORY = 10


def aged_split(
    text: str, *, now: datetime, window: timedelta, lookback: timedelta, catalog: LogCatalog
) -> tuple[str, dict[str, Any]]:
    """The recent text to classify, and the summary keys for what was set aside: `lookback`,
    `old_lines`, and `history`: the recognised fault lines among the old ones, newest first,
    each with its time and age."""
    span = max(window, lookback)
    aged = split_by_age(text, now=now, lookback=span)
    summary: dict[str, Any] = {"lookback": _hours(span), "old_lines": len(aged.old)}
    if not aged.old:
        return aged.current, summary | {"history": []}
    times = {line: at for at, line in aged.old}
    found = classify_text("\n".join(line for _, line in aged.old), catalog)
    rows = [
        {
            "at": times[m.line].isoformat(),
            "age": describe_age(now - times[m.line]),
            "signature": m.signature,
            "layer": m.layer,
            "xid": m.xid,
            "line": m.line[:300],
        }
        for m in found.matches
        if m.layer and not m.secondary and m.line in times
    ]
    rows.sort(key=lambda r: str(r["at"]), reverse=True)
    return aged.current, summary | {"history": rows[:MAX_HISTORY]}


def history_notes(steps: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per kernel-log read with old fault lines: the newest of them, as history."""
    notes: list[str] = []
    for data in steps.values():
        if not isinstance(data, Mapping) or data.get("read") != "node_logs":
            continue
        rows = data.get("history") or []
        if not rows:
            continue
        newest = rows[0]
        what = f"XID {newest['xid']}" if newest.get("xid") is not None else newest["signature"]
        where = ", ".join(data.get("nodes", [])) or "the node"
        notes.append(
            f"{where} kernel log: last {what} {newest['age']} ago ({len(rows)} old fault "
            f"line(s), older than the {data.get('lookback')} lookback): history, not a "
            "current fault"
        )
    return tuple(notes)


def _hours(span: timedelta) -> str:
    hours = span.total_seconds() / 3600
    return f"{hours:g}h" if hours >= 1 else f"{span.total_seconds() / 60:g}m"

"""How an incident is named on the command line and in Slack: `INC-7`, `inc-7`, `7`. Shared by
the ORM store (storage/incidents.py) and the light reads (storage/glance.py)."""

from __future__ import annotations

import re

_REF = re.compile(r"^\s*(?:inc-?)?(\d+)\s*$", re.IGNORECASE)


def parse_incident_ref(ref: str | int) -> int | None:
    """`"INC-7"`, `"inc-7"`, `"7"` or `7` -> 7; anything else -> None."""
    if isinstance(ref, int):
        return ref if ref > 0 else None
    match = _REF.match(ref)
    return int(match.group(1)) if match else None

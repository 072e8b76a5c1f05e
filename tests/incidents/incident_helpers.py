"""Test helper: the ECC-storm incident on gpu-node-03 the incident tests start from, opened
through the lifecycle (so its timeline begins as a real one does).

Shared by tests/incidents/test_humans_record.py and test_lifecycle_timestamps.py.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from bot.clock import FakeClock
from bot.incidents import lifecycle
from storage.tables import Incident


def open_ecc_storm(session: Session, clock: FakeClock, *, fired: datetime | None) -> Incident:
    """The bot's critical ECC-storm incident, detected now; `fired`: when its alert fired."""
    return lifecycle.open_incident(
        session,
        runbook="ecc-storm",
        target="gpu-node-03",
        target_kind="node",
        severity="critical",
        title="ECC error storm on gpu-node-03",
        fired_at=fired,
        detected_at=clock.now(),
        actor="bot",
    )

"""The postmortem's metric chart draws the number its finding states, up to the verification.

Covers, on ecc-dbe-storm (GPU 5 of gpu-node-03 logs double-bit ECC errors) run to its end on the
injectable clock: the finding cites gpu.ecc.dbe_rate with a value; the stored snapshot's culprit
series, read with the gathering step's window, has that very value at the verdict's time (the
chart once said 6/min where the finding said 4/min: its points were 1-minute rates, the finding's
a 15-minute one); after the verification the same snapshot is read again up to the
verification's time, so the chart covers the fix.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from actions.test_drain_after_checkpoint import storm

from bot.wiring.runtime import Runtime
from storage import incidents as incident_store
from storage import snapshots as snapshot_store
from storage.db import session_scope

NODE = "gpu-node-03"


__all__ = ["storm"]  # the fixture: a fresh ecc-dbe-storm runtime


def test_the_chart_shows_the_findings_rate_and_reaches_the_verification(storm: Runtime) -> None:
    loaded = storm.catalog.get("ecc-storm")
    incident_id, _ = storm.engine.open_incident(loaded, {"node": NODE}, actor="cli:dave")
    asked = storm.engine.start(
        loaded, inputs={"node": NODE}, incident_id=incident_id, requester="cli:dave"
    )
    verdict = asked.steps["where"]
    [evidence] = [
        e
        for f in verdict["findings"]
        for e in f.get("evidence", [])
        if e.get("what") == "gpu.ecc.dbe_rate" and e.get("value")
    ][:1]
    with session_scope(storm.db) as session:
        first = snapshot_store.latest_snapshot(session, incident_id=incident_id)
        assert first is not None
        first_end = first.end
        culprit = next(s for s in first.series if s["role"] == "culprit")
    at_verdict = culprit["points"][-1]
    assert at_verdict[1] == pytest.approx(float(evidence["value"]))

    done = storm.engine.resume(asked.run_id, decision="approve", actor="cli:erin")
    verified_at = datetime.fromisoformat(done.steps["confirm"]["at"])
    assert done.steps["confirm"]["status"] == "passed"
    with session_scope(storm.db) as session:
        again = snapshot_store.latest_snapshot(session, incident_id=incident_id)
        assert again is not None and again.id == first.id  # the same snapshot, read again
        assert again.end >= verified_at > first_end  # the step is recorded just after its "at"
        series = next(s for s in again.series if s["role"] == "culprit")
        incident = incident_store.get_incident(session, incident_id)
        assert incident is not None and incident.mitigated_at is not None
    last_time = series["points"][-1][0]
    assert last_time >= incident.mitigated_at.timestamp() - again.step_seconds

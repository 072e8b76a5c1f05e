"""The per-step deadline of a run (issue 20): a gather step whose outside call does not answer
stops being waited for, and the run goes on as its failure rules say for an input that did
not answer.

Covers: a telemetry query and a kernel-log read that really block (until the test lets them
go) end their steps *unavailable* once the deadline passes, each error naming runbook, step
and deadline; the checks that read them are unknown rather than failing the run, the other
steps keep their data, and the run reaches its end (its approval) instead of hanging.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta
from typing import Any, cast

from bot.wiring.runtime import Runtime
from integrations.cluster import Cluster
from integrations.telemetry import SignalQuery, Telemetry
from tests.engine.runbook_helpers import open_incident

NODE = "gpu-node-03"
DEADLINE = timedelta(seconds=3)
"""Far above what an unblocked in-process read takes even on a loaded machine (the other
gathers must keep their data); the blocked reads wait it out, side by side."""


class Blocking:
    """Failure injection: the wrapped port's `method` (for `signal`, if given) blocks until
    `released` is set; everything else is the real port's."""

    def __init__(self, inner: Any, method: str, released: threading.Event, signal: str = ""):
        self._inner, self._method, self._released, self._signal = inner, method, released, signal

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._inner, name)
        if name != self._method:
            return real

        def blocked(*args: Any, **kwargs: Any) -> Any:
            query = args[0] if args else None
            if not self._signal or (
                isinstance(query, SignalQuery) and query.signal == self._signal
            ):
                self._released.wait(timeout=60)
            return real(*args, **kwargs)

        return blocked


def test_blocked_gathers_end_unavailable_at_the_deadline_and_the_run_goes_on(rt: Runtime) -> None:
    released = threading.Event()
    telemetry = Blocking(rt.deps.telemetry, "read", released, signal="gpu.xid.last")
    cluster = Blocking(rt.deps.cluster, "node_logs", released)
    deps = dataclasses.replace(
        rt.deps,
        telemetry=cast(Telemetry, telemetry),
        cluster=cast(Cluster, cluster),
        step_deadline=DEADLINE,
    )
    rt.engine.deps = rt.engine.work.deps = deps
    incident_id = open_incident(rt, rt.catalog.get("ecc-storm"))
    try:
        outcome = rt.engine.start(
            rt.catalog.get("ecc-storm"),
            inputs={"node": NODE},
            incident_id=incident_id,
            requester="alertmanager",
        )
    finally:
        released.set()

    assert outcome.status != "failed"
    steps = outcome.steps
    for step, backend in (("xid", "telemetry"), ("kernel", "cluster")):
        assert steps[step]["unavailable"] == backend
        assert steps[step]["error"].startswith(
            f"step '{step}' of runbook 'ecc-storm' exceeded its deadline of 3 s"
        ), steps[step]["error"]
    assert steps["xid"]["max"] is None and steps["kernel"]["missing"] is True
    assert steps["ecc_xid"]["status"] == "unknown", "a check over a silent input is unknown"
    assert "gpu.xid.last" in steps["ecc_xid"]["missing_signals"]
    assert steps["dbe"]["max"] > 0, "the other gathers keep their data"
    assert "dbe_storm" in steps and "fix" in steps

"""Reads started ahead of their run's graph (issue 21).

A fresh triage's first reads depend on its inputs alone. A worker knows those inputs (checked,
bot/engine/working.py) before it claims the work row and records the run in one transaction,
and before LangGraph starts the graph: ~5 ms of this process's work at 1,024 nodes, during
which the telemetry backend could already be answering. So the worker starts the reads of the
graph's first stage on the stage pool first (`RunEngine.read_ahead`), records the run
meanwhile, and the stage, when the graph runs it, waits for those reads instead of sending
them again (`StageNode`, bot/engine/stages.py).

What this does not change: reads only read (idempotent, no record of them is made until the
stage ends, as before); a run that is not started here (another worker holds the row, the
inputs changed, the run was recorded elsewhere) has its reads dropped unseen; a stage that
fails, or a run retried or taken over, reads again (an entry is taken once); a read's
outcome, error included, is the stage's as if it had started it. At most `KEPT` runs' reads
wait here; a run that never reached its stage is forgotten first.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

KEPT = 64
"""Runs whose reads ahead are kept at most (a worker takes its own within milliseconds)."""


@dataclass(frozen=True)
class _Started:
    node: str
    inputs: Mapping[str, Any]
    target: str
    futures: Mapping[int, Future[Any]]


class ReadsAhead:
    """Reads started for a run's stage before the graph ran it, by run id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[str, _Started] = {}

    def put(
        self, run_id: str, node: str, state: Mapping[str, Any], futures: Mapping[int, Future[Any]]
    ) -> None:
        """Keep the reads started for `run_id`'s `node` from `state` (the run's graph input)."""
        started = _Started(node, dict(state.get("inputs", {})), state.get("target", ""), futures)
        with self._lock:
            self._started[run_id] = started
            while len(self._started) > KEPT:
                self._started.pop(next(iter(self._started)))

    def take(
        self, run_id: str, node: str, state: Mapping[str, Any]
    ) -> Mapping[int, Future[Any]] | None:
        """The reads started for `run_id`'s `node` from the same inputs as `state`'s, once;
        None when there are none (the node reads itself)."""
        if not self._started:  # most nodes of most runs: no lock
            return None
        with self._lock:
            started = self._started.get(run_id)
            if started is None or started.node != node:
                return None
            del self._started[run_id]
        same = started.inputs == state.get("inputs", {}) and started.target == state.get("target")
        return started.futures if same else None

    def drop(self, run_id: str) -> None:
        """Forget `run_id`'s reads ahead, if any (its run is not started by this worker)."""
        with self._lock:
            self._started.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._started)

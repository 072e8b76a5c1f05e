"""Thread pools that remember their unfinished work, so tests and shutdown can wait for it.

Bolt runs each listener on its `listener_executor` after the request is acknowledged; runbook
runs and resumes go to a second pool so a long run never delays the 3-second ack of the next
command. Both are `TrackedExecutor`s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class TrackedExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor that knows which of its futures are still running."""

    def __init__(self, *, workers: int, name: str) -> None:
        super().__init__(max_workers=workers, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._pending: set[Future[Any]] = set()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future = super().submit(fn, *args, **kwargs)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def pending(self) -> list[Future[Any]]:
        with self._lock:
            return list(self._pending)


def wait_idle(executors: Iterable[TrackedExecutor], *, timeout: float) -> bool:
    """Wait until none of the executors has unfinished work, including work that finishing work
    submitted (a listener that hands a run to the run pool). False if `timeout` passes first."""
    pools = list(executors)
    deadline = time.monotonic() + timeout
    while True:
        pending = [future for pool in pools for future in pool.pending()]
        if not pending:
            return True
        _done, not_done = wait(pending, timeout=max(0.0, deadline - time.monotonic()))
        if not_done:
            return False

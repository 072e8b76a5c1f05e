"""One thread pool for the steps of every run (issue 21).

LangGraph runs a super-step's sync nodes, and its checkpoint writes, on a thread pool it builds
for each `stream()` (`langgraph.pregel._executor.BackgroundExecutor`, through langchain-core's
`get_executor_for_config`): several thread starts per triage, ~15 % of its window. `share()`
points that lookup at one process-wide pool that is never shut down between runs. Each run
still waits only for its own tasks (BackgroundExecutor keeps its futures), and a pool thread
never waits for a task queued after its own (the loop's thread does the waiting), so runs
sharing the pool cannot deadlock it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.pregel import _executor
from langgraph.pregel._loop import SyncPregelLoop

from storage.checkpointer_savers import BufferedWrites

logger = logging.getLogger(__name__)

WORKERS = 16
"""Threads of the shared pool: parallel gather steps of a few concurrent runs."""

_pool: ContextThreadPoolExecutor | None = None
_lock = threading.Lock()


class _HoldsInline:
    """The shared pool, except for two calls made in the submitting thread (issue 21):
    - a saver's task writes held in memory (`BufferedWrites.put_writes`,
      storage/checkpointer_savers.py: a list append, no I/O): LangGraph submits each task's
      writes to its pool, and a thread hand-off per task cost more than the append;
    - a super-step's checkpoint put into such a saver (`_checkpointer_put_after_previous`):
      the engine streams with `durability="sync"`, so the loop waits for that put right after
      submitting it (before the next super-step starts, and before the finished task's
      update reaches the engine). A hand-off there was ~1 ms of a triage's critical path
      while its reads' threads held the interpreter; inline, the put runs where the loop
      would wait for it, in the same order (the previous put and the super-step's writes
      are done first, as the function itself waits for them)."""

    def __init__(self, pool: ContextThreadPoolExecutor) -> None:
        self.pool = pool

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        target = args[0] if args else None  # BackgroundExecutor submits (ctx.run, fn, ...)
        if not _inline(target):
            return self.pool.submit(fn, *args, **kwargs)
        done: Future[Any] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 (the future carries it, as the pool's would)
            done.set_exception(exc)
        return done


def _inline(target: Any) -> bool:
    """Whether `target` is one of the calls `_HoldsInline` makes in the submitting thread."""
    function = getattr(target, "__func__", None)
    if function is BufferedWrites.put_writes:
        return True
    if function is None or function is not _PUT_AFTER_PREVIOUS:
        return False
    return isinstance(getattr(target.__self__, "checkpointer", None), BufferedWrites)


_PUT_AFTER_PREVIOUS = getattr(SyncPregelLoop, "_checkpointer_put_after_previous", None)
"""LangGraph's checkpoint put after the previous one (None if LangGraph renamed it: then
every put goes to the pool, as LangGraph does it)."""


@contextmanager
def _shared(config: Any) -> Iterator[_HoldsInline]:
    """`get_executor_for_config` for LangGraph: the shared pool, left running on exit."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ContextThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="steps")
        pool = _pool
    yield _HoldsInline(pool)


def share() -> None:
    """Make every LangGraph stream of this process use the shared pool (idempotent)."""
    if getattr(_executor, "get_executor_for_config", None) is None:  # LangGraph moved it
        logger.warning("LangGraph has no get_executor_for_config: runs keep their own pools")
        return
    setattr(_executor, "get_executor_for_config", _shared)  # noqa: B010 (a private module)

"""The per-step deadline of a run: a gather step's outside call (a telemetry query, a cluster
read) that takes longer than `Deps.step_deadline` stops being waited for.

The step then ends as its failure rules say for an outside input that did not answer
(steps.gather, steps.cluster_gaps): its output is *unavailable* with an error naming runbook,
step and deadline, the checks that read it are unknown, and the run goes on. Python cannot stop
a thread, so the call itself runs on a small pool of its own and finishes (or times out on its
client's own timeout) in the background; a worker of the run is never held past the deadline.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta
from typing import TypeVar

from bot.errors import OncallError

T = TypeVar("T")

_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="step-call")
"""Outside calls of gather steps. Calls left running past their deadline hold a thread here
until their client gives up; past 32 of them, new calls wait their turn within their own
deadline."""


class StepDeadlineExceeded(OncallError):
    """A step's outside call took longer than the per-step deadline."""

    def __init__(self, *, runbook: str, step: str, deadline: timedelta) -> None:
        seconds = f"{deadline.total_seconds():g}"
        super().__init__(
            f"step '{step}' of runbook '{runbook}' exceeded its deadline of {seconds} s "
            "(setting work.step_deadline_seconds); its input is unavailable"
        )
        self.runbook, self.step, self.deadline = runbook, step, deadline


def within_deadline(call: Callable[[], T], *, deadline: timedelta, runbook: str, step: str) -> T:
    """`call()`'s result, or StepDeadlineExceeded once `deadline` has passed without one (the
    call goes on in the background). Errors of `call` propagate as they are."""
    context = contextvars.copy_context()
    future = _POOL.submit(context.run, call)
    try:
        return future.result(timeout=deadline.total_seconds())
    except FutureTimeout:
        future.cancel()  # not started yet (the pool was full): it never will be
        raise StepDeadlineExceeded(runbook=runbook, step=step, deadline=deadline) from None

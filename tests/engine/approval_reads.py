"""What one approval decision costs: SELECTs on the `approvals` table (a SQLAlchemy
`before_cursor_execute` listener on every engine) and resolutions of the approval policy
(`RunEngine.policy_for`), counted per thread while an adapter decides — apart from the run the
decision drives on (`WorkQueue.perform_claimed`, `RunEngine.continue_run`) and the Slack
message drawn as it goes (`TriageMessages.snapshot`), which are the run's and the message's
reads, not the decision's.

Written against seams that exist before and after the approval use case, so the same counts can
be taken of the code before it (docs/performance.md).
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.engine.running import RunEngine
from bot.engine.working import WorkQueue

DECIDING, ASIDE = "deciding", "aside"
_local = threading.local()


@dataclass
class Tally:
    """Per thread: approval SELECTs and policy resolutions while deciding, and decisions."""

    selects: Counter[int] = field(default_factory=Counter)
    policies: Counter[int] = field(default_factory=Counter)
    decisions: Counter[int] = field(default_factory=Counter)

    def totals(self) -> tuple[int, int]:
        """(SELECTs, policy resolutions) over every thread so far."""
        return sum(self.selects.values()), sum(self.policies.values())

    def per_decision(self) -> list[tuple[int, int]]:
        """(SELECTs, policy resolutions) of each deciding thread, in thread order."""
        return [(self.selects[t], self.policies[t]) for t in sorted(self.decisions)]


def _tags() -> list[str]:
    tags: list[str] = _local.__dict__.setdefault("tags", [])
    return tags


def _deciding() -> bool:
    tags = _tags()
    return DECIDING in tags and ASIDE not in tags


def _tagged(tag: str, fn: Callable[..., Any], tally: Tally | None = None) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if tally is not None and not _tags():
            tally.decisions[threading.get_ident()] += 1
        _tags().append(tag)
        try:
            return fn(*args, **kwargs)
        finally:
            _tags().pop()

    return wrapper


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch, deciders: list[tuple[Any, str]]) -> Iterator[Tally]:
    """Count while the `deciders` (owner, attribute name) run. Patch before the adapter binds
    `RunEngine.policy_for` (build the Slack app inside the block)."""
    tally = Tally()
    for owner, name in deciders:
        monkeypatch.setattr(owner, name, _tagged(DECIDING, getattr(owner, name), tally))
    for owner, name in ((WorkQueue, "perform_claimed"), (RunEngine, "continue_run")):
        monkeypatch.setattr(owner, name, _tagged(ASIDE, getattr(owner, name)))
    from bot.slack.triaging import TriageMessages

    monkeypatch.setattr(TriageMessages, "snapshot", _tagged(ASIDE, TriageMessages.snapshot))
    resolve = RunEngine.policy_for

    def policy_for(engine: RunEngine, runbook: str) -> Any:
        if _deciding():
            tally.policies[threading.get_ident()] += 1
        return resolve(engine, runbook)

    monkeypatch.setattr(RunEngine, "policy_for", policy_for)

    def before(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        text = " ".join(statement.split()).lower()
        if _deciding() and text.startswith("select") and " from approvals" in text:
            tally.selects[threading.get_ident()] += 1

    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield tally
    finally:
        event.remove(Engine, "before_cursor_execute", before)

"""What driving a run reports: `RunOutcome` (status, step outputs, a pending approval), shared by
the run engine (running.py) and its work queue (working.py) so neither imports the other."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

StepCallback = Callable[[str, Mapping[str, Any]], None]
"""Told each step (id, output) after its records are committed."""

FINISHED = frozenset({"completed", "failed", "rejected"})
"""Run statuses after which nothing more happens to a run."""


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    incident: str
    runbook: str
    status: str  # completed | awaiting_approval | waiting (a timer) | rejected | failed
    steps: dict[str, Any] = field(default_factory=dict)
    approval: dict[str, Any] | None = None

    @property
    def verdict(self) -> dict[str, Any]:
        for output in self.steps.values():
            if output.get("kind") == "localize":
                return dict(output)
        return {}

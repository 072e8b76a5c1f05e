"""The localize step: every check outcome -> a verdict (bot.diagnosis.localizing)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from bot.diagnosis.findings import CheckOutcome
from bot.diagnosis.localizing import localize
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step, StepKind
from bot.engine.state import Deps, RunState
from bot.engine.steps.common import output
from bot.engine.steps.gather import NodeFn


def make_localize_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    checks = [s.id for s in loaded.runbook.steps if s.kind is StepKind.CHECK]

    def localize_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        steps = state.get("steps", {})
        outcomes = [CheckOutcome.from_dict(steps[c]) for c in checks if c in steps]
        verdict = localize(outcomes)
        return output(step, verdict.to_dict())

    return localize_node

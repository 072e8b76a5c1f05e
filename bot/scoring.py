"""Score a scenario run against its ground truth (`expect`) and render the eval report. Pure.

A layer is correct when the verdict's layer equals the expected one; culprits are correct when
the verdict names exactly the expected set (a healthy target: none). Forbidden actions are the
proposed ones the scenario lists in `not_actions`, plus any destructive action proposed when
the expected layer is `none` (DESIGN §12: nothing destructive for a healthy target).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from bot.engine.running import RunOutcome
from integrations.sim.scenarios import Expect


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    expected_runbook: str
    runbook: str | None
    expected_layer: str
    predicted_layer: str | None
    expected_culprits: tuple[str, ...]
    predicted_culprits: tuple[str, ...]
    expected_actions: tuple[str, ...]
    proposed_actions: tuple[str, ...]
    forbidden_actions_proposed: tuple[str, ...]
    queries: int
    diagnosis_ms: float | None
    status: str | None = None
    """The run's status when eval stopped it: `awaiting_approval`, or `completed` when nothing
    was proposed. Never past an approval: eval carries nothing out."""
    error: str | None = None

    @property
    def layer_correct(self) -> bool:
        return self.predicted_layer == self.expected_layer

    @property
    def culprit_correct(self) -> bool:
        return self.predicted_layer is not None and set(self.predicted_culprits) == set(
            self.expected_culprits
        )

    @property
    def actions_correct(self) -> bool:
        """Every expected action was proposed (extra non-forbidden ones are allowed)."""
        return set(self.expected_actions) <= set(self.proposed_actions)

    def to_json(self) -> dict[str, Any]:
        """Exactly the fields `gpu-oncall eval --json` documents, per scenario."""
        return {
            "name": self.name,
            "expected_layer": self.expected_layer,
            "predicted_layer": self.predicted_layer,
            "layer_correct": self.layer_correct,
            "expected_culprits": list(self.expected_culprits),
            "predicted_culprits": list(self.predicted_culprits),
            "culprit_correct": self.culprit_correct,
            "proposed_actions": list(self.proposed_actions),
            "forbidden_actions_proposed": list(self.forbidden_actions_proposed),
            "queries": self.queries,
            "diagnosis_ms": None if self.diagnosis_ms is None else round(self.diagnosis_ms, 1),
        }


def score(
    name: str,
    expect: Expect,
    *,
    runbook: str | None,
    outcome: RunOutcome | None,
    error: str | None,
    queries: int,
    diagnosis_ms: float | None,
    destructive: Collection[str],
) -> ScenarioResult:
    """Compare what the run concluded and proposed with the scenario's `expect` block."""
    verdict = outcome.verdict if outcome else {}
    proposed = tuple(
        dict.fromkeys(
            action
            for output in (outcome.steps.values() if outcome else ())
            if output.get("kind") == "propose"
            for action in output.get("actions", [])
        )
    )
    forbidden = {a for a in proposed if a in expect.not_actions}
    if expect.layer == "none":
        forbidden |= {a for a in proposed if a in destructive}
    return ScenarioResult(
        name=name,
        expected_runbook=expect.runbook,
        runbook=runbook,
        expected_layer=expect.layer,
        predicted_layer=verdict.get("layer"),
        expected_culprits=tuple(expect.culprits),
        predicted_culprits=tuple(verdict.get("culprits", [])),
        expected_actions=tuple(expect.actions),
        proposed_actions=proposed,
        forbidden_actions_proposed=tuple(a for a in proposed if a in forbidden),
        queries=queries,
        diagnosis_ms=diagnosis_ms,
        status=outcome.status if outcome else None,
        error=error,
    )


def summarize(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """The totals `gpu-oncall eval --json` documents."""
    n = len(results)
    return {
        "layer_accuracy": round(sum(r.layer_correct for r in results) / n, 4) if n else 0.0,
        "culprit_accuracy": round(sum(r.culprit_correct for r in results) / n, 4) if n else 0.0,
        "forbidden_action_count": sum(len(r.forbidden_actions_proposed) for r in results),
        "scenarios": n,
    }


def render_json(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    return {"scenarios": [r.to_json() for r in results], "summary": summarize(results)}


def render_table(results: Sequence[ScenarioResult]) -> list[str]:
    """One line per scenario (expected vs predicted layer, culprits, actions, time, queries),
    then the totals."""
    width = max([len(r.name) for r in results] + [8])
    lines = [
        f"{'SCENARIO':<{width}}  {'RUNBOOK':<20} {'EXPECTED':<13} {'PREDICTED':<15} "
        f"{'CULPRITS (expected -> predicted)':<44} {'ACTIONS':<36} {'TTD ms':>7} {'Q':>3}"
    ]
    for r in results:
        runbook = r.runbook or "-"
        if r.runbook != r.expected_runbook:
            runbook += f" (!={r.expected_runbook})"
        predicted = f"{r.predicted_layer or '-'} {_mark(r.layer_correct)}"
        culprits = (
            f"{_names(r.expected_culprits)} -> {_names(r.predicted_culprits)} "
            f"{_mark(r.culprit_correct)}"
        )
        actions = _names(r.proposed_actions) + (
            f" FORBIDDEN: {_names(r.forbidden_actions_proposed)}"
            if r.forbidden_actions_proposed
            else ""
        )
        ttd = "-" if r.diagnosis_ms is None else f"{r.diagnosis_ms:.0f}"
        lines.append(
            f"{r.name:<{width}}  {runbook:<20} {r.expected_layer:<13} {predicted:<15} "
            f"{culprits:<44} {actions:<36} {ttd:>7} {r.queries:>3}"
        )
        if r.error:
            lines.append(f"{'':<{width}}  error: {r.error}")
    lines.extend(render_totals(results))
    return lines


def render_totals(results: Sequence[ScenarioResult]) -> list[str]:
    n = len(results)
    summary = summarize(results)
    times = [r.diagnosis_ms for r in results if r.diagnosis_ms is not None]
    actions_ok = sum(r.actions_correct for r in results)
    lines = [
        "",
        f"scenarios            {n}",
        f"layer accuracy       {sum(r.layer_correct for r in results)}/{n} "
        f"({summary['layer_accuracy']:.1%})",
        f"culprit accuracy     {sum(r.culprit_correct for r in results)}/{n} "
        f"({summary['culprit_accuracy']:.1%})",
        f"expected actions     {actions_ok}/{n} proposed in full",
        f"forbidden actions    {summary['forbidden_action_count']}",
    ]
    if times:
        median = statistics.median(times)
        lines.append(f"time to diagnosis    median {median:.0f} ms, max {max(times):.0f} ms")
    queries = [r.queries for r in results]
    if queries:
        lines.append(
            f"queries per run      median {statistics.median(queries):.0f}, max {max(queries)}"
        )
    return lines


def _mark(ok: bool) -> str:
    return "ok" if ok else "XX"


def _names(items: Sequence[str]) -> str:
    return ",".join(items) if items else "none"

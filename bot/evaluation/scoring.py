"""Score a scenario run against its ground truth (`expect`) and render the eval report. Pure.

A layer is correct when the verdict's layer equals the expected one; culprits are correct when
the verdict names exactly the expected set (a healthy target: none) and, where the scenario
names the culprit GPUs (`expect.gpus`) or HCAs (`expect.hcas`), exactly those devices too: a
verdict naming the right node but the wrong GPU is wrong. Forbidden actions are the proposed
ones the scenario lists in `not_actions`, plus any destructive action proposed when the
expected layer is `none` (DESIGN §12: nothing destructive for a healthy target).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.engine.running import RunOutcome
from simulator.scenarios import Expect


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
    expected_devices: tuple[str, ...] = ()
    """`node:gpu-index` / `node:mlx5_N` the scenario names; empty = scored at node level."""
    predicted_devices: tuple[str, ...] = ()
    """The GPUs and HCAs the verdict's culprits name, in the same form."""
    run_ms: float | None = None
    """Wall time from the trigger to the run stopping (at its approval, or its end)."""
    status: str | None = None
    """The run's status when eval stopped it: `awaiting_approval`, or `completed` when nothing
    was proposed. Never past an approval: eval carries nothing out."""
    error: str | None = None
    expected_finding: str | None = None
    """The deciding finding's mechanism the scenario names (`expect.finding`); None: unscored."""
    predicted_finding: str | None = None
    """The verdict's deciding mechanism."""

    @property
    def mechanism_correct(self) -> bool:
        """The verdict's deciding mechanism is the expected one (true when none is expected)."""
        return self.expected_finding is None or self.predicted_finding == self.expected_finding

    @property
    def layer_correct(self) -> bool:
        return self.predicted_layer == self.expected_layer

    @property
    def culprit_correct(self) -> bool:
        named = self.predicted_layer is not None and set(self.predicted_culprits) == set(
            self.expected_culprits
        )
        return named and self.device_correct

    @property
    def device_correct(self) -> bool:
        """The expected GPUs/HCAs are exactly the verdict's devices of those kinds (true when
        the scenario names none)."""
        if not self.expected_devices:
            return True
        kinds = {_device_kind(d) for d in self.expected_devices}
        predicted = {d for d in self.predicted_devices if _device_kind(d) in kinds}
        return predicted == set(self.expected_devices)

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
            "expected_devices": list(self.expected_devices),
            "predicted_devices": list(self.predicted_devices),
            "expected_actions": list(self.expected_actions),
            "proposed_actions": list(self.proposed_actions),
            "actions_correct": self.actions_correct,
            "forbidden_actions_proposed": list(self.forbidden_actions_proposed),
            "expected_finding": self.expected_finding,
            "predicted_finding": self.predicted_finding,
            "mechanism_correct": self.mechanism_correct,
            "queries": self.queries,
            "diagnosis_ms": _ms(self.diagnosis_ms),
            "run_ms": _ms(self.run_ms),
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
    run_ms: float | None = None,
) -> ScenarioResult:
    """Compare what the run concluded and proposed with the scenario's `expect` block."""
    verdict = outcome.verdict if outcome else {}
    expected_devices = (*expect.gpus, *(f"{n}:{d}" for n, d in _split(expect.hcas)))
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
        expected_devices=tuple(expected_devices),
        predicted_devices=devices_named(verdict.get("culprit_details", [])),
        run_ms=run_ms,
        status=outcome.status if outcome else None,
        error=error,
        expected_finding=expect.finding,
        predicted_finding=verdict.get("mechanism"),
    )


def devices_named(details: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The GPUs (`node:3`) and HCAs (`node:mlx5_3`, port dropped) a verdict's culprits name."""
    named: list[str] = []
    for c in details:
        node = c.get("node")
        if not node:
            continue
        if c.get("gpu") not in (None, ""):
            named.append(f"{node}:{c['gpu']}")
        if c.get("hca"):
            named.append(f"{node}:{str(c['hca']).split(':')[0]}")
    return tuple(dict.fromkeys(named))


def _split(refs: Sequence[str]) -> list[tuple[str, str]]:
    return [(ref.rpartition(":")[0], ref.rpartition(":")[2]) for ref in refs]


def _device_kind(ref: str) -> str:
    return "hca" if ref.rpartition(":")[2].startswith("mlx5_") else "gpu"


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def summarize(results: Sequence[ScenarioResult]) -> dict[str, Any]:
    """The totals `gpu-oncall eval --json` documents."""
    n = len(results)
    granular = [r for r in results if r.expected_devices]
    reasoned = [r for r in results if r.expected_finding]
    times = [r.diagnosis_ms for r in results if r.diagnosis_ms is not None]
    runs = [r.run_ms for r in results if r.run_ms is not None]
    return {
        "layer_accuracy": _share(sum(r.layer_correct for r in results), n),
        "culprit_accuracy": _share(sum(r.culprit_correct for r in results), n),
        "device_scored": len(granular),
        "device_accuracy": _share(sum(r.device_correct for r in granular), len(granular)),
        "mechanism_scored": len(reasoned),
        "mechanism_accuracy": _share(sum(r.mechanism_correct for r in reasoned), len(reasoned)),
        "action_accuracy": _share(sum(r.actions_correct for r in results), n),
        "forbidden_action_count": sum(len(r.forbidden_actions_proposed) for r in results),
        "diagnosis_ms_median": _ms(statistics.median(times)) if times else None,
        "diagnosis_ms_max": _ms(max(times)) if times else None,
        "run_ms_total": _ms(sum(runs)) if runs else None,
        "scenarios": n,
    }


def _share(count: int, total: int) -> float:
    return round(count / total, 4) if total else 0.0


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
        if not r.device_correct:
            lines.append(
                f"{'':<{width}}  devices: {_names(r.expected_devices)} -> "
                f"{_names(r.predicted_devices)}"
            )
        if not r.mechanism_correct:
            lines.append(
                f"{'':<{width}}  mechanism: {r.expected_finding} -> {r.predicted_finding or 'none'}"
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
        f"device culprits      {sum(r.device_correct for r in results if r.expected_devices)}/"
        f"{summary['device_scored']} scenarios naming a GPU/HCA",
        f"mechanism accuracy   {sum(r.mechanism_correct for r in results if r.expected_finding)}/"
        f"{summary['mechanism_scored']} scenarios naming their deciding finding",
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

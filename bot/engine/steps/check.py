"""Check steps: a CEL condition over gathered data -> fired (a finding), passed, or unknown.

A condition that cannot be evaluated because a signal it reads is missing is *unknown*, never
*passed*: a silent exporter must not rule a layer out.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Evidence, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.engine.expressions import ExpressionError
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step
from bot.engine.state import Deps, RunState, step_context
from bot.engine.steps.common import output
from bot.engine.steps.gather import NodeFn
from bot.engine.templates import TemplateRenderError

MAX_EVIDENCE = 8


def make_check_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    expression = loaded.expression(step.id, "check")
    reads = sorted(expression.variables & set(loaded.deps[step.id]))

    def check_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        context = step_context(state)
        steps = state.get("steps", {})
        missing = _missing_signals(steps, reads)
        error = None
        try:
            fired = expression.test(context)
        except ExpressionError as exc:
            fired, error = False, str(exc)
        if fired:
            status = CheckStatus.FIRED
        elif missing or error:
            status = CheckStatus.UNKNOWN
        else:
            status = CheckStatus.PASSED
        finding = _finding(step, loaded, context, steps, reads) if fired else None
        outcome = CheckOutcome(
            check_id=step.id,
            layer=Layer(step.layer or "workload"),
            status=status,
            finding=finding,
            missing_signals=tuple(missing),
        )
        extra = {"error": error} if error and not missing else {}
        return output(step, outcome.to_dict() | extra)

    return check_node


def _missing_signals(steps: dict[str, Any], reads: list[str]) -> list[str]:
    missing = []
    for name in reads:
        data = steps.get(name, {})
        if data.get("kind") == "signal" and (data.get("missing") or data.get("missing_nodes")):
            missing.append(data.get("signal", name))
    return missing


def _finding(
    step: Step,
    loaded: LoadedRunbook,
    context: dict[str, Any],
    steps: dict[str, Any],
    reads: list[str],
) -> Finding:
    try:
        summary = loaded.template(step.id, "finding").render(context)
    except TemplateRenderError:
        summary = f"{step.title or step.id}: condition held ({step.check})"
    culprit = {key: _lenient(loaded, step, f"culprit.{key}", context) for key in step.culprit}
    affected = _node_list(culprit.pop("nodes", None))
    if affected and "node" not in culprit:
        culprit["node"] = affected[0]
    if "node" not in culprit and "workload" not in culprit:
        culprit["node"] = _default_target(context)
    return Finding(
        check_id=step.id,
        layer=Layer(step.layer or "workload"),
        severity=Severity(step.severity),
        summary=summary,
        culprit=Culprit(**{k: v for k, v in culprit.items() if v}),
        evidence=tuple(_evidence(steps, reads)),
        affected=affected,
    )


def _node_list(rendered: str | None) -> tuple[str, ...]:
    """`culprit.nodes` renders to node names separated by commas or spaces (a finding about
    several nodes at once, e.g. every node of a rack whose GPUs are power-braked)."""
    if not rendered:
        return ()
    names = rendered.replace(",", " ").split()
    return tuple(dict.fromkeys(n.strip("[]'\"") for n in names if n.strip("[]'\"")))


def _lenient(loaded: LoadedRunbook, step: Step, field: str, context: dict[str, Any]) -> str | None:
    try:
        value = loaded.template(step.id, field).render(context).strip()
    except TemplateRenderError:
        return None
    return value or None


def _default_target(context: dict[str, Any]) -> str | None:
    value = context.get("node") or context.get("target")
    return str(value) if value else None


def _evidence(steps: dict[str, Any], reads: list[str]) -> list[Evidence]:
    evidence: list[Evidence] = []
    for name in reads:
        data = steps.get(name, {})
        if data.get("kind") == "signal":
            for sample in data.get("over_zero", [])[:MAX_EVIDENCE]:
                labels = {k: str(v) for k, v in sample.items() if k not in ("node", "value")}
                labels["node"] = sample["node"]
                evidence.append(Evidence(name, data["signal"], sample["value"], labels))
        elif data.get("kind") == "cluster":
            for match in data.get("matches", [])[:MAX_EVIDENCE]:
                evidence.append(Evidence(name, match["signature"], match["line"]))
            if data.get("read") == "node" and data.get("conditions"):
                conditions = {k: str(v) for k, v in data["conditions"].items()}
                evidence.append(Evidence(name, "node.conditions", None, conditions))
    return evidence[: MAX_EVIDENCE * 2]

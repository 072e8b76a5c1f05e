"""Check steps: a CEL condition over gathered data -> fired (a finding), passed, or unknown.

A condition that cannot be evaluated because a signal it reads is missing is *unknown*, never
*passed*: a silent exporter must not rule a layer out.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.naming import backed_culprit
from bot.engine.expressions import ExpressionError
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step
from bot.engine.state import Deps, RunState, step_context
from bot.engine.steps.citing import cite
from bot.engine.steps.common import output
from bot.engine.steps.gather import NodeFn
from bot.engine.templates import TemplateRenderError


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
        finding = _finding(step, loaded, context, steps, reads, runtime.context) if fired else None
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
        elif data.get("kind") == "cluster" and data.get("unavailable"):
            missing.append(data.get("error") or f"{name} unavailable")
    return missing


def _finding(
    step: Step,
    loaded: LoadedRunbook,
    context: dict[str, Any],
    steps: dict[str, Any],
    reads: list[str],
    deps: Deps,
) -> Finding:
    try:
        summary = loaded.template(step.id, "finding").render(context)
    except TemplateRenderError:
        summary = f"{step.title or step.id}: condition held ({step.check})"
    culprit = {key: _lenient(loaded, step, f"culprit.{key}", context) for key in step.culprit}
    members = _devices(culprit.pop("gpus", None), kind="gpu") + _devices(
        culprit.pop("hcas", None), kind="hca"
    )
    affected = _node_list(culprit.pop("nodes", None)) or tuple(
        dict.fromkeys(m.node for m in members if m.node)
    )
    if affected and "node" not in culprit:
        culprit["node"] = affected[0]
    if "node" not in culprit and "workload" not in culprit:
        culprit["node"] = _default_target(context)
    named = Culprit(**{k: v for k, v in culprit.items() if v})
    if members and not (named.gpu or named.hca):  # the first node's own device
        named = next((m for m in members if m.node == named.node), named)
    cited = cite(
        steps, reads, culprit=named, members=members, unit_of=lambda signal: _unit(deps, signal)
    )
    return Finding(
        check_id=step.id,
        layer=Layer(step.layer or "workload"),
        severity=Severity(step.severity),
        summary=summary,
        culprit=backed_culprit(named, cited.rows),  # a gauge at 0 names no GPU
        evidence=cited.rows,
        affected=affected,
        outlier=cited.outlier,
        members=members,
        mechanism=step.mechanism,
    )


def _unit(deps: Deps, signal: str) -> str:
    return deps.signals.get(signal).unit if signal in deps.signals else ""


def _node_list(rendered: str | None) -> tuple[str, ...]:
    """`culprit.nodes` renders to node names separated by commas or spaces (a finding about
    several nodes at once, e.g. every node of a rack whose GPUs are power-braked)."""
    if not rendered:
        return ()
    names = rendered.replace(",", " ").split()
    return tuple(dict.fromkeys(n.strip("[]'\"") for n in names if n.strip("[]'\"")))


def _devices(rendered: str | None, *, kind: str) -> tuple[Culprit, ...]:
    """`culprit.gpus` / `culprit.hcas` render to `node:device` tokens separated by commas or
    spaces (`gpu-node-05:4`, `gpu-node-03:mlx5_2:1`): each node's own GPU or HCA port, for a
    finding about devices on many nodes. A node name never holds a colon, so the first one
    splits the node from the device."""
    found: dict[tuple[str, str], Culprit] = {}
    for token in (rendered or "").replace(",", " ").split():
        node, _, device = token.strip("[]'\"").partition(":")
        if node and device:
            found.setdefault((node, device), Culprit(node=node, **{kind: device}))
    return tuple(found.values())


def _lenient(loaded: LoadedRunbook, step: Step, field: str, context: dict[str, Any]) -> str | None:
    try:
        value = loaded.template(step.id, field).render(context).strip()
    except TemplateRenderError:
        return None
    return value or None


def _default_target(context: dict[str, Any]) -> str | None:
    value = context.get("node") or context.get("target")
    return str(value) if value else None

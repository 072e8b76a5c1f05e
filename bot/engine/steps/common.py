"""Helpers shared by step nodes: parsing durations, resolving targets, step output access."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from typing import Any

from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step
from bot.engine.state import RunState, step_context
from bot.errors import UserInputError
from integrations import durations
from integrations.names import expand_nodes


def parse_duration(text: str | float | int) -> timedelta:
    """'30s', '15m', '1h', '7d' -> timedelta (integrations/durations.py); a number is seconds."""
    try:
        return durations.parse_duration(text)
    except durations.InvalidDuration as exc:
        raise UserInputError(str(exc)) from exc


def format_window(delta: timedelta) -> str:
    return durations.render_duration(delta)


def render_with(loaded: LoadedRunbook, step: Step, key: str, state: RunState) -> str | None:
    if key not in step.with_:
        return None
    return loaded.template(step.id, f"with.{key}").render(step_context(state))


#: `with: {nodes: "*"}`: a signal step reads every node of the fleet (still one query).
ALL_NODES = "*"


def target_nodes(loaded: LoadedRunbook, step: Step, state: RunState) -> list[str]:
    """The nodes a gather step reads: `with.nodes`/`with.node`, else the `node` input.
    Empty means "the run's workload's nodes", or the whole fleet for `nodes: "*"`."""
    rendered = render_with(loaded, step, "nodes", state) or render_with(loaded, step, "node", state)
    if rendered is None:
        inputs = state.get("inputs", {})
        rendered = inputs.get("nodes") or inputs.get("node") or ""
    if str(rendered).strip() == ALL_NODES:
        return []
    return list(_expanded(str(rendered))) if rendered else []


@lru_cache(maxsize=64)
def _expanded(spec: str) -> tuple[str, ...]:
    """`expand_nodes`, once per spec: every gather step of a storm's run reads the same list of
    thousands of members, checked name by name (an invalid spec raises each time)."""
    return tuple(expand_nodes(spec))


def fleet_wide(loaded: LoadedRunbook, step: Step, state: RunState) -> bool:
    """Whether the step asked for every node (`with: {nodes: "*"}`)."""
    return (render_with(loaded, step, "nodes", state) or "").strip() == ALL_NODES


def step_window(loaded: LoadedRunbook, step: Step, state: RunState) -> timedelta:
    rendered = render_with(loaded, step, "window", state)
    if rendered is None:
        rendered = str(state.get("inputs", {}).get("window") or "15m")
    return parse_duration(rendered)


def output(step: Step, value: dict[str, Any]) -> dict[str, Any]:
    return {"steps": {step.id: {"kind": step.kind.value, **value}}}

"""Helpers shared by step nodes: parsing durations, resolving targets, step output access."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step
from bot.engine.state import RunState, step_context
from bot.errors import UserInputError
from integrations.names import expand_nodes

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | float | int) -> timedelta:
    """'30s', '15m', '1h', '7d' -> timedelta. A bare number is seconds."""
    if isinstance(text, int | float):
        return timedelta(seconds=float(text))
    match = _DURATION.match(str(text).strip())
    if match is None:
        raise UserInputError(f"invalid duration '{text}' (use e.g. 30s, 15m, 1h, 7d)")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


def format_window(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


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
    return expand_nodes(str(rendered)) if rendered else []


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

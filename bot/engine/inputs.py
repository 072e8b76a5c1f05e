"""A runbook's inputs: defaults applied, required ones present, each value checked against its
type (node names through the one validator, node ranges capped before expansion, durations,
numbers). Errors name the runbook and the input; shared by the CLI, Slack and the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.engine.loading import LoadedRunbook
from bot.engine.steps.common import parse_duration
from bot.errors import UserInputError
from integrations.errors import InvalidName
from integrations.names import check_node_name, expand_nodes


def resolve_inputs(loaded: LoadedRunbook, given: Mapping[str, Any]) -> dict[str, Any]:
    """Apply defaults, check required inputs and types. Errors name the runbook and input."""
    spec = loaded.runbook.inputs
    unknown = sorted(set(given) - set(spec) - {"requester"})
    if unknown:
        valid = ", ".join(spec) or "none"
        raise UserInputError(
            f"runbook '{loaded.name}': unknown input '{unknown[0]}' (inputs: {valid})"
        )
    resolved: dict[str, Any] = {}
    for name, item in spec.items():
        value = given.get(name, item.default)
        if value is None:
            if item.required:
                raise UserInputError(
                    f"runbook '{loaded.name}': input '{name}' is required "
                    f"({item.help or item.type})"
                )
            continue
        resolved[name] = _coerce(loaded.name, name, item.type, value)
    return resolved


def _coerce(runbook: str, name: str, kind: str, value: Any) -> Any:
    try:
        if kind == "node":
            return check_node_name(str(value))
        if kind == "nodes":
            names = expand_nodes(str(value))
            if not names:
                raise ValueError("no node names given (e.g. gpu-node-01,gpu-node-[04-07])")
            return ",".join(dict.fromkeys(names))
        if kind == "duration":
            parse_duration(str(value))
            return str(value)
        if kind == "number":
            return float(value)
    except (InvalidName, ValueError) as exc:
        raise UserInputError(f"runbook '{runbook}': input '{name}': {exc}") from exc
    return str(value)

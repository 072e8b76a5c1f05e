"""Scenario files (DESIGN.md §10): a fleet, the faults placed on it, a trigger and ground truth,
read and checked (the models are in scenario_specs.py, the reference checks in scenario_checks.py).

Every error, YAML or schema or a
reference the fleet cannot satisfy, raises ScenarioError naming the file and the field path:
`scenarios/x.yaml: field 'faults.0.kind': unknown fault kind 'ecc_storm' (kinds: ...)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from integrations.errors import ScenarioError
from simulator.scenario_checks import reference_problems
from simulator.scenario_specs import Expect, FaultSpec, Scenario

__all__ = ["SCENARIO_DIR", "Expect", "FaultSpec", "Scenario", "load_scenario", "parse_scenario"]
"""The door to scenarios: reading them, and the models callers name (scenario_specs.py)."""

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file. Every error names the file and the field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: invalid YAML: {exc}") from exc
    return parse_scenario(raw, source=str(path))


def parse_scenario(raw: Any, *, source: str = "<scenario>") -> Scenario:
    """Validate already-parsed YAML (a dict). Errors name `source` and the field path."""
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ScenarioError(f"{source}: field '{where}': {_message(first, raw)}") from exc
    for where, problem in reference_problems(scenario):
        raise ScenarioError(f"{source}: field '{where}': {problem}")
    return scenario


def _message(error: Any, raw: Any) -> str:
    if error["type"] == "extra_forbidden":
        fields = _fields_at(Scenario, tuple(error["loc"][:-1]))
        hint = f" (fields: {', '.join(fields)})" if fields else ""
        return f"unknown field{hint}"
    return str(error["msg"]).removeprefix("Value error, ")


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model found at `loc` (list indices skipped)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if _is_model(current) else None
        if field is None:
            return []
        current = _inner_model(field.annotation)
    return list(current.model_fields) if _is_model(current) else []


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseModel)


def _inner_model(annotation: Any) -> Any:
    if _is_model(annotation):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None

"""Kubernetes label selectors (metav1.LabelSelector) matched against a node's labels.

Pure: `matches(selector, labels)` applies `matchLabels` and `matchExpressions` (In, NotIn,
Exists, DoesNotExist) as `metav1.LabelSelectorAsSelector` does: every requirement must hold,
an empty selector selects everything, NotIn and DoesNotExist hold when the key is absent.
A malformed selector raises `InvalidSelector` naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class InvalidSelector(ValueError):
    """A label selector the API would refuse to turn into a selector."""


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether `labels` satisfy the selector (None or {} selects everything)."""
    if not selector:
        return True
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise InvalidSelector("matchLabels must be a map and matchExpressions a list")
    if any(labels.get(str(k)) != str(v) for k, v in match_labels.items()):
        return False
    return all(_holds(expression, labels) for expression in expressions)


def _holds(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        raise InvalidSelector(f"a matchExpressions entry must be a map, not {expression!r}")
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if not key or not isinstance(key, str):
        raise InvalidSelector("a matchExpressions entry has no key")
    if operator not in OPERATORS:
        raise InvalidSelector(
            f"matchExpressions key {key}: operator {operator!r} is not one of "
            + ", ".join(OPERATORS)
        )
    if not isinstance(values, list):
        raise InvalidSelector(f"matchExpressions key {key}: values must be a list")
    if operator in ("In", "NotIn") and not values:
        raise InvalidSelector(f"matchExpressions key {key}: {operator} needs values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidSelector(f"matchExpressions key {key}: {operator} takes no values")
    present = key in labels
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    inside = present and labels[key] in {str(v) for v in values}
    return inside if operator == "In" else not inside

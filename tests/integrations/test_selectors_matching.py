"""Label selectors (integrations/selectors.py) as metav1.LabelSelectorAsSelector applies them.

Covers: an empty or missing selector selects everything; matchLabels needs every pair;
In / NotIn / Exists / DoesNotExist, including an absent key (NotIn and DoesNotExist hold);
matchLabels and matchExpressions together are ANDed; malformed selectors (unknown operator, In
without values, Exists with values, no key, wrong shapes) raise InvalidSelector naming the key.
"""

from __future__ import annotations

from typing import Any

import pytest

from integrations.selectors import InvalidSelector, matches

NODE = {"kubernetes.io/hostname": "gpu-node-01", "gpu-oncall.io/rack": "rack-00"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}, "matchExpressions": []}])
def test_an_empty_selector_selects_everything(selector: dict[str, Any] | None) -> None:
    assert matches(selector, NODE) and matches(selector, {})


def test_match_labels_needs_every_pair() -> None:
    assert matches({"matchLabels": {"gpu-oncall.io/rack": "rack-00"}}, NODE)
    both = {"gpu-oncall.io/rack": "rack-00", "kubernetes.io/hostname": "gpu-node-02"}
    assert not matches({"matchLabels": both}, NODE)
    assert not matches({"matchLabels": {"absent": "x"}}, NODE)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (expr("gpu-oncall.io/rack", "In", "rack-01", "rack-00"), True),
        (expr("gpu-oncall.io/rack", "In", "rack-01"), False),
        (expr("absent", "In", "x"), False),
        (expr("gpu-oncall.io/rack", "NotIn", "rack-01"), True),
        (expr("gpu-oncall.io/rack", "NotIn", "rack-00"), False),
        (expr("absent", "NotIn", "x"), True),
        (expr("gpu-oncall.io/rack", "Exists"), True),
        (expr("absent", "Exists"), False),
        (expr("gpu-oncall.io/rack", "DoesNotExist"), False),
        (expr("absent", "DoesNotExist"), True),
    ],
)
def test_match_expressions(selector: dict[str, Any], expected: bool) -> None:
    assert matches(selector, NODE) is expected


def test_labels_and_expressions_must_all_hold() -> None:
    selector = {
        "matchLabels": {"gpu-oncall.io/rack": "rack-00"},
        "matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-node-00"]},
            {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"},
        ],
    }
    assert matches(selector, NODE)
    assert not matches(selector, NODE | {"kubernetes.io/hostname": "gpu-node-00"})
    assert not matches(selector, NODE | {"node-role.kubernetes.io/control-plane": ""})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (expr("gpu-oncall.io/rack", "Equals", "x"), "key gpu-oncall.io/rack: operator 'Equals'"),
        (expr("gpu-oncall.io/rack", "In"), "key gpu-oncall.io/rack: In needs values"),
        (expr("gpu-oncall.io/rack", "Exists", "x"), "Exists takes no values"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "has no key"),
        ({"matchExpressions": ["rack"]}, "must be a map"),
        ({"matchLabels": ["rack"]}, "matchLabels must be a map"),
    ],
)
def test_malformed_selectors_are_refused(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSelector, match=message):
        matches(selector, NODE)

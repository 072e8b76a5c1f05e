"""Expressions hand CEL only the fields they read, and evaluate as they would on whole outputs.

Covers: `step.field` reads (has() included) are found per variable; a variable used any other
way (bare, indexed, a macro or method on it) is handed over whole; names inside string literals
(raw, escaped, triple-quoted) and comments are not reads; macro variables are not step names;
results and missing-field errors are the same as with whole outputs.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.engine.expressions import ExpressionError, compile_expression

OUTPUT = {
    "max": 4.0,
    "min": 0.0,
    "missing": False,
    "over_zero": [{"node": "gpu-node-03", "gpu": "5", "value": 4.0}],
    "samples": [{"node": f"gpu-node-{i:02d}", "value": 0.0} for i in range(64)],
}


def fields(source: str) -> dict[str, set[str]]:
    return {name: set(read) for name, read in compile_expression(source).fields.items()}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("dbe.max > 0.0", {"dbe": {"max"}}),
        ("dbe.max > 0.0 || dbe.missing", {"dbe": {"max", "missing"}}),
        ("has(dbe.max) && xid.max >= 1.0", {"dbe": {"max"}, "xid": {"max"}}),
        ("dbe.over_zero.exists(s, s.value > 1.0)", {"dbe": {"over_zero"}}),
        ("dbe . max > 0.0 // dbe.samples is not read\n", {"dbe": {"max"}}),
        ("sbe.max > sbe_threshold", {"sbe": {"max"}}),
    ],
)
def test_field_reads_are_found_per_variable(source: str, expected: dict[str, set[str]]) -> None:
    assert fields(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "size(dbe) > 0 && dbe.max > 0.0",
        "dbe['max'] > 0.0",
        "dbe.exists(k, k == 'max')",
        "dbe.max(1) > 0.0",
        "{'a': dbe}.a.max > 0.0",
    ],
)
def test_a_variable_used_otherwise_is_handed_over_whole(source: str) -> None:
    assert "dbe" not in fields(source)


@pytest.mark.parametrize(
    "source",
    [
        "'dbe.samples' == kernel.text && dbe.max > 0.0",
        "r'\\d dbe.samples' == kernel.text && dbe.max > 0.0",
        "'it\\'s dbe' == kernel.text && dbe.max > 0.0",
        '"""dbe\ndbe.samples""" == kernel.text && dbe.max > 0.0',
    ],
)
def test_names_inside_strings_are_not_reads(source: str) -> None:
    assert fields(source) == {"dbe": {"max"}, "kernel": {"text"}}


def test_macro_variables_are_not_steps() -> None:
    expression = compile_expression("xid.over_zero.exists(s, s.value in [48.0, 63.0])")
    assert expression.variables == {"xid"}
    assert fields(expression.source) == {"xid": {"over_zero"}}


@pytest.mark.parametrize(
    ("source", "context"),
    [
        ("dbe.max > 0.0", {"dbe": OUTPUT}),
        ("has(dbe.argmax)", {"dbe": OUTPUT}),
        ("dbe.over_zero.exists(s, s.gpu == '5') && size(dbe.samples) == 64", {"dbe": OUTPUT}),
        ("size(dbe) == 5 && dbe.min == 0.0", {"dbe": OUTPUT}),
        ("dbe.max > limit", {"dbe": OUTPUT, "limit": 1.0}),
    ],
)
def test_results_equal_those_on_whole_outputs(source: str, context: dict[str, Any]) -> None:
    expression = compile_expression(source)
    whole = expression.program.execute({k: context[k] for k in expression.variables})
    assert expression.evaluate(context) == whole


def test_a_missing_field_fails_as_it_would_on_the_whole_output() -> None:
    with pytest.raises(ExpressionError, match="argmax"):
        compile_expression("dbe.argmax.gpu == '5'").evaluate({"dbe": OUTPUT})

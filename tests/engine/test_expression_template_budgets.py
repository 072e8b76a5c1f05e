"""Budgets of runbook CEL checks and Jinja templates (issue 20): what used to run without end
is refused when the runbook is loaded, or stopped while it renders.

Covers: CEL comprehensions nested three deep (the shape of a check that never ends) and an
over-long expression are refused at compile time naming the limit; a result past the output
cap is an ExpressionError; ordinary checks still work. Jinja: loops nested three deep and
`range()` past MAX_RANGE are refused, string repetition and huge exponents are refused, output
past the cap and a render past the deadline (injected clock) stop with TemplateRenderError;
generated templates either render or raise TemplateRenderError, within the output cap.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.engine.expressions import (
    EXPRESSION_SOURCE_CHARS,
    ExpressionError,
    compile_expression,
)
from bot.engine.templates import TemplateRenderError, compile_template
from bot.limits import EXPRESSION_OUTPUT_CHARS, TEMPLATE_OUTPUT_CHARS

NEVER_ENDS = "xs.all(a, xs.all(b, xs.all(c, xs.all(d, a + b + c + d >= 0))))"


def test_deeply_nested_comprehensions_are_refused_when_loaded() -> None:
    with pytest.raises(ExpressionError, match="comprehensions nested 4 deep; at most 2"):
        compile_expression(NEVER_ENDS)


def test_an_over_long_expression_is_refused() -> None:
    with pytest.raises(ExpressionError, match=f"at most {EXPRESSION_SOURCE_CHARS}"):
        compile_expression("1.0 + " * 400 + "1.0")


def test_a_result_past_the_output_cap_is_an_error() -> None:
    big = compile_expression("xs + xs + xs + xs")
    with pytest.raises(ExpressionError, match=f"larger than {EXPRESSION_OUTPUT_CHARS}"):
        big.evaluate({"xs": ["x" * 1000] * 30})


@pytest.mark.parametrize(
    ("source", "items"),
    [("xs.map(x, x).size() > 0", 10_000), ("xs.all(a, xs.all(b, a >= b))", 5_000)],
)
def test_comprehensions_over_too_long_lists_are_refused_before_cel_runs(
    source: str, items: int
) -> None:
    # map over 10,000 items took 41 s in CEL; refused before it starts.
    with pytest.raises(ExpressionError, match="would cost more than the budget"):
        compile_expression(source).evaluate({"xs": list(range(items))})


def test_ordinary_checks_still_work() -> None:
    check = compile_expression("xs.exists(x, ys.all(y, y < x)) && dbe.max > 0.0")
    assert check.test({"xs": [3, 5], "ys": [1, 2], "dbe": {"max": 1.0}})


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (
            "{% for a in x %}{% for b in x %}{% for c in x %}{% endfor %}{% endfor %}{% endfor %}",
            "loops nested 3 deep",
        ),
    ],
)
def test_templates_too_deep_are_refused_when_loaded(source: str, problem: str) -> None:
    with pytest.raises(TemplateRenderError, match=problem):
        compile_template(source)


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("{{ range(10000000)|length }}", "range\\(\\) of 10000000 numbers"),
        ("{{ 'x' * 1000000000 }}", "repetition past"),
        ("{{ 10 ** 100000000 }}", "exponent 100000000 is too large"),
        (
            "{% for a in range(1000) %}{% for b in range(1000) %}xxxxxxxx{% endfor %}{% endfor %}",
            f"output past {TEMPLATE_OUTPUT_CHARS} characters",
        ),
    ],
)
def test_templates_over_budget_stop_while_rendering(source: str, problem: str) -> None:
    with pytest.raises(TemplateRenderError, match=problem):
        compile_template(source).render({})


def test_a_render_past_the_deadline_stops() -> None:
    ticks = itertools.count(0, 0.5)
    slow = compile_template("{% for a in range(100) %}{{ a }}{% endfor %}")
    with pytest.raises(TemplateRenderError, match="not rendered within"):
        slow.render({}, clock=lambda: float(next(ticks)))


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}%#()*x01 a+-|~'\"")), max_size=60))
def test_generated_templates_render_or_raise_our_error(source: str) -> None:
    try:
        text = compile_template(source).render({"x": [1, 2]})
    except TemplateRenderError as exc:
        assert str(exc)
    else:
        assert len(text) <= TEMPLATE_OUTPUT_CHARS

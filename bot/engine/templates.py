"""Sandboxed message templates (Jinja2's SandboxedEnvironment, StrictUndefined).

Templates render finding texts, culprit fields and step parameters. They can read the run's
inputs and step outputs, never call into Python beyond Jinja's sandboxed filters. Each has a
budget (bot.limits): loops nest at most MAX_LOOP_DEPTH deep and `range` gives at most
MAX_RANGE numbers (checked when the template is loaded), and a render stops past
TEMPLATE_OUTPUT_CHARS characters or TEMPLATE_SECONDS of the rendering thread's CPU time (not
wall time: a loaded machine or a busy GIL must not fail a template that did little work).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateError, meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from bot.limits import TEMPLATE_OUTPUT_CHARS, TEMPLATE_SECONDS

MAX_RANGE = 1000
"""Most numbers `range()` gives in a template."""
MAX_LOOP_DEPTH = 2
"""Deepest nesting of `{% for %}` loops in one template."""

class _BoundedEnvironment(SandboxedEnvironment):
    """The sandbox, with `*` and `**` refused past the output budget (`'x' * 10**9`)."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise TemplateError(f"exponent {right} is too large (at most 64)")
        if operator == "*" and isinstance(left, str | list | tuple) and isinstance(right, int):
            left, right = right, left
        repeated = isinstance(right, str | list | tuple) and isinstance(left, int)
        if operator == "*" and repeated and left * len(right) > TEMPLATE_OUTPUT_CHARS:
            raise TemplateError(f"repetition past {TEMPLATE_OUTPUT_CHARS} items")
        return super().call_binop(context, operator, left, right)


_ENV = _BoundedEnvironment(
    undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False
)


def _fmt(value: Any, digits: int = 2) -> str:
    """Format a number compactly: 3.0 -> '3', 0.1234 -> '0.12', None -> 'n/a'."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return f"{value:.{digits}f}"
    return str(value)


def _range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise TemplateError(f"range() of {len(numbers)} numbers; at most {MAX_RANGE}")
    return numbers


_ENV.filters["num"] = _fmt
_ENV.globals["range"] = _range


class TemplateRenderError(ValueError):
    """A template does not parse or refers to something that is not there."""


@dataclass(frozen=True)
class MessageTemplate:
    source: str
    variables: frozenset[str]
    template: Any

    def render(
        self, context: Mapping[str, Any], *, clock: Callable[[], float] = time.thread_time
    ) -> str:
        """The rendered text, within the output and time budgets."""
        deadline = clock() + TEMPLATE_SECONDS
        parts: list[str] = []
        size = 0
        try:
            for part in self.template.generate(dict(context)):
                size += len(part)
                if size > TEMPLATE_OUTPUT_CHARS:
                    raise TemplateRenderError(
                        f"'{self.source[:80]}': output past {TEMPLATE_OUTPUT_CHARS} characters"
                    )
                if clock() > deadline:
                    raise TemplateRenderError(
                        f"'{self.source[:80]}': not rendered within {TEMPLATE_SECONDS:g} s"
                    )
                parts.append(str(part))
        except TemplateError as exc:
            raise TemplateRenderError(f"'{self.source}': {exc}") from exc
        return "".join(parts)


def compile_template(source: str) -> MessageTemplate:
    """Parse `source` and record the top-level names it reads."""
    try:
        ast = _ENV.parse(source)
        template = _ENV.from_string(source)
    except TemplateError as exc:
        raise TemplateRenderError(f"'{source}': {exc}") from exc
    depth = _loop_depth(ast)
    if depth > MAX_LOOP_DEPTH:
        raise TemplateRenderError(
            f"'{source[:80]}': loops nested {depth} deep; at most {MAX_LOOP_DEPTH}"
        )
    names = frozenset(meta.find_undeclared_variables(ast))
    return MessageTemplate(source=source, variables=names, template=template)


def _loop_depth(node: nodes.Node) -> int:
    inner = max((_loop_depth(child) for child in node.iter_child_nodes()), default=0)
    return inner + (1 if isinstance(node, nodes.For) else 0)

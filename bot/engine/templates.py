"""Sandboxed message templates (Jinja2's SandboxedEnvironment, StrictUndefined).

Templates render finding texts, culprit fields and step parameters. They can read the run's
inputs and step outputs, never call into Python beyond Jinja's sandboxed filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import SandboxedEnvironment

_ENV = SandboxedEnvironment(
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


_ENV.filters["num"] = _fmt


class TemplateRenderError(ValueError):
    """A template does not parse or refers to something that is not there."""


@dataclass(frozen=True)
class MessageTemplate:
    source: str
    variables: frozenset[str]
    template: Any

    def render(self, context: Mapping[str, Any]) -> str:
        try:
            return str(self.template.render(dict(context)))
        except TemplateError as exc:
            raise TemplateRenderError(f"'{self.source}': {exc}") from exc


def compile_template(source: str) -> MessageTemplate:
    """Parse `source` and record the top-level names it reads."""
    try:
        ast = _ENV.parse(source)
        template = _ENV.from_string(source)
    except TemplateError as exc:
        raise TemplateRenderError(f"'{source}': {exc}") from exc
    names = frozenset(meta.find_undeclared_variables(ast))
    return MessageTemplate(source=source, variables=names, template=template)

"""Safe condition expressions: CEL (the Kubernetes convention), never Python eval.

Expressions are compiled once at load time; `variables` tells the compiler which steps an
expression reads, which is how data dependencies (and so concurrency) are found.
Numbers from signals are doubles: write `0.0`, not `0` (CEL does not coerce int and double).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cel

# Comprehension macros bind their own iteration variable: `xs.exists(x, x > 1)`.
_MACRO_VAR = re.compile(
    r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,"
)


class ExpressionError(ValueError):
    """The expression does not parse, or failed while being evaluated."""


@dataclass(frozen=True)
class Expression:
    source: str
    program: Any
    variables: frozenset[str]

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """Evaluate against `context`. Raises ExpressionError with the reason on failure.

        Only the names the expression reads are handed to CEL: converting a whole run's step
        outputs for every check would cost more than evaluating it."""
        try:
            return self.program.execute({k: context[k] for k in self.variables if k in context})
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise ExpressionError(f"'{self.source}': {_short(exc)}") from exc

    def test(self, context: Mapping[str, Any]) -> bool:
        """Evaluate as a condition; a non-boolean result is an error, not truthiness."""
        value = self.evaluate(context)
        if not isinstance(value, bool):
            raise ExpressionError(f"'{self.source}' gave {value!r}, not true/false")
        return value


def compile_expression(source: str) -> Expression:
    """Parse `source` as CEL. Raises ExpressionError naming the position on a syntax error."""
    if not source or not source.strip():
        raise ExpressionError("expression is empty")
    try:
        program = cel.compile(source)
    except ValueError as exc:
        raise ExpressionError(f"'{source}': {_short(exc)}") from exc
    bound = set(_MACRO_VAR.findall(source))
    variables = frozenset(v for v in program.variables() if v not in bound)
    return Expression(source=source, program=program, variables=variables)


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, KeyError):
        return f"no field {text}"
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0] if lines else type(exc).__name__
    if "Syntax error" in head or "ERROR: <input>" in head:
        return head.split("ERROR: <input>:", 1)[-1].strip()
    return head[:200]

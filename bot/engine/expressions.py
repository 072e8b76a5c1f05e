"""Safe condition expressions: CEL (the Kubernetes convention), never Python eval.

Expressions are compiled once at load time; `variables` tells the compiler which steps an
expression reads, which is how data dependencies (and so concurrency) are found, and `fields`
which of their fields, so evaluation converts only those for CEL.
Numbers from signals are doubles: write `0.0`, not `0` (CEL does not coerce int and double).

Budgets (bot.limits): CEL has no loops, only comprehension macros over lists, so the work of an
expression is bounded by its size and its macros' nesting; both are checked when it is loaded
(at most EXPRESSION_SOURCE_CHARS characters, macros nested at most MAX_MACRO_DEPTH deep), since
CEL runs in native code that a deadline could not interrupt. A result larger than
EXPRESSION_OUTPUT_CHARS is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cel

from bot.limits import EXPRESSION_OUTPUT_CHARS

EXPRESSION_SOURCE_CHARS = 2000
"""Longest expression (runbook checks are one line)."""
MAX_MACRO_DEPTH = 2
"""Deepest nesting of comprehension macros (`all`, `exists`, `map`, ...)."""
EXPRESSION_COST = 2_500_000
"""Most work one evaluation may cost: n ** depth * (10, or n for `map`/`filter`, which CEL
builds in quadratic time), n the longest list handed to it (about 1 s on this machine)."""
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})

# Comprehension macros bind their own iteration variable: `xs.exists(x, x > 1)`.
_MACRO_VAR = re.compile(
    r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,"
)
# CEL's lexical grammar, as far as finding `name.field` needs: string literals (raw ones have no
# escapes) and comments are skipped, so a name inside them is not a read.
_TOKEN = re.compile(
    r"""(?P<skip>
          (?:[rR][bB]?|[bB][rR])(?:'{3}.*?'{3}|"{3}.*?"{3}|'[^'\n]*'|"[^"\n]*")
        | [bB]?(?:'{3}(?:\\.|[^\\])*?'{3}|"{3}(?:\\.|[^\\])*?"{3}
                 |'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")
        | //[^\n]*
        | \s+
      )
    | (?P<number>\d[\w.]*)
    | (?P<ident>[A-Za-z_]\w*)
    | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)


class ExpressionError(ValueError):
    """The expression does not parse, or failed while being evaluated."""


@dataclass(frozen=True)
class Expression:
    source: str
    program: Any
    variables: frozenset[str]
    fields: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """For each variable the expression reads only as `name.field`: those fields."""
    depth: int = 0
    """How deep its comprehension macros nest."""
    builds: bool = False
    """Whether it uses `map` or `filter` (quadratic in this CEL)."""

    def evaluate(self, context: Mapping[str, Any]) -> Any:
        """Evaluate against `context`. Raises ExpressionError with the reason on failure.

        Only what the expression reads is handed to CEL: the names it reads and, of a mapping
        read only field by field, those fields. Converting a step output for CEL costs about
        80 µs per KB of JSON (a check reading `dbe.max` would convert every sample)."""
        activation = self._activation(context)
        self._check_cost(activation)
        try:
            value = self.program.execute(activation)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise ExpressionError(f"'{self.source}': {_short(exc)}") from exc
        if _size(value, EXPRESSION_OUTPUT_CHARS) > EXPRESSION_OUTPUT_CHARS:
            raise ExpressionError(
                f"'{self.source[:80]}': result larger than {EXPRESSION_OUTPUT_CHARS} characters"
            )
        return value

    def _check_cost(self, activation: Mapping[str, Any]) -> None:
        """Refuse before CEL starts (native code no deadline can interrupt) an evaluation
        whose comprehensions over these lists would cost more than EXPRESSION_COST."""
        if self.depth == 0:
            return
        n = max((_longest(v) for v in activation.values()), default=0)
        cost = n**self.depth * (n if self.builds else 10)
        if cost > EXPRESSION_COST:
            raise ExpressionError(
                f"'{self.source[:80]}': comprehensions nested {self.depth} deep over a list of "
                f"{n} items would cost more than the budget ({EXPRESSION_COST:,} steps)"
            )

    def _activation(self, context: Mapping[str, Any]) -> dict[str, Any]:
        activation = {}
        for name in self.variables:
            if name not in context:
                continue
            value, fields = context[name], self.fields.get(name)
            if fields is not None and isinstance(value, Mapping):
                value = {key: value[key] for key in fields if key in value}
            activation[name] = value
        return activation

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
    if len(source) > EXPRESSION_SOURCE_CHARS:
        raise ExpressionError(
            f"expression of {len(source)} characters; at most {EXPRESSION_SOURCE_CHARS}"
        )
    depth = macro_depth(source)
    if depth > MAX_MACRO_DEPTH:
        raise ExpressionError(
            f"'{source[:80]}': comprehensions nested {depth} deep; at most {MAX_MACRO_DEPTH}"
        )
    try:
        program = cel.compile(source)
    except ValueError as exc:
        raise ExpressionError(f"'{source}': {_short(exc)}") from exc
    bound = set(_MACRO_VAR.findall(source))
    variables = frozenset(v for v in program.variables() if v not in bound)
    return Expression(
        source=source,
        program=program,
        variables=variables,
        fields=field_reads(source, variables),
        depth=depth,
        builds=re.search(r"\.\s*(?:map|filter)\s*\(", source) is not None,
    )


def field_reads(source: str, variables: frozenset[str]) -> dict[str, frozenset[str]]:
    """The fields read of each variable that `source` uses only as `name.field` (has() included).

    A variable used any other way (bare, indexed, `name.exists(...)`) is left out: it is handed
    to CEL whole.
    """
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(source) if m.lastgroup != "skip"]
    fields: dict[str, set[str]] = {}
    whole: set[str] = set()
    for i, (kind, text) in enumerate(tokens):
        if kind != "ident" or text not in variables or (i and tokens[i - 1][1] == "."):
            continue  # not a variable: a field, a function, or another name
        read = _field_after(tokens[i + 1 : i + 4])
        if read is None:
            whole.add(text)
        else:
            fields.setdefault(text, set()).add(read)
    return {name: frozenset(read) for name, read in fields.items() if name not in whole}


def macro_depth(source: str) -> int:
    """How deep comprehension macros (`xs.all(x, ...)`) nest in `source`."""
    tokens = [m.group() for m in _TOKEN.finditer(source) if m.lastgroup != "skip"]
    stack: list[bool] = []  # one entry per open parenthesis: is it a macro's?
    deepest = 0
    for i, text in enumerate(tokens):
        if text == "(":
            macro = i >= 2 and tokens[i - 1] in _MACROS and tokens[i - 2] == "."
            stack.append(macro)
            deepest = max(deepest, sum(stack))
        elif text == ")" and stack:
            stack.pop()
    return deepest


def _longest(value: Any, depth: int = 0) -> int:
    """The length of the longest list in `value` (looked into a few levels deep)."""
    if depth > 3:
        return 0
    if isinstance(value, Mapping):
        return max((_longest(v, depth + 1) for v in value.values()), default=0)
    if isinstance(value, list | tuple):
        inner = max((_longest(v, depth + 1) for v in value[:100]), default=0)
        return max(len(value), inner)
    return 0


def _size(value: Any, cap: int) -> int:
    """About how many characters `value` takes as JSON, counting no further than `cap`."""
    if isinstance(value, str | bytes):
        return len(value)
    if isinstance(value, Mapping):
        items: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return 8
    total = 2
    for item in items:
        total += _size(item, cap) + 1
        if total > cap:
            break
    return total


def _field_after(following: list[tuple[str | None, str]]) -> str | None:
    """`field` when the tokens after a variable read `.field` (not a `.method(` call)."""
    if len(following) < 2 or following[0][1] != "." or following[1][0] != "ident":
        return None
    if len(following) == 3 and following[2][1] == "(":
        return None
    return following[1][1]


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, KeyError):
        return f"no field {text}"
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0] if lines else type(exc).__name__
    if "Syntax error" in head or "ERROR: <input>" in head:
        return head.split("ERROR: <input>:", 1)[-1].strip()
    return head[:200]

"""The literal text every match of a regex starts with, so a line's search can be shared.

A kernel log's XID storm repeats one message under a new timestamp per line. When a pattern
starts with a literal (`NVRM: Xid \\(...`), every match starts where that literal occurs, and
what matches at a position depends only on the text from there on (no lookbehind reads further
back; `^` fails at any position but the first in both). So searching a line gives the same
groups as searching it from the literal's first occurrence: the storm's 60 lines are one search.

The analysis is conservative: anything it is unsure of (a top-level `|`, a lookbehind,
IGNORECASE or VERBOSE, a quantifier on the last literal) gives no prefix, and the line is then
searched whole. Pure: no I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache

_META = frozenset(".^$*+?{}[]()|\\")
_QUANTIFIERS = frozenset("*+?{")


@lru_cache(maxsize=1024)
def literal_prefix(pattern: re.Pattern[str]) -> str:
    """The literal every match of `pattern` starts with ("" when none is certain)."""
    if pattern.flags & (re.IGNORECASE | re.VERBOSE):
        return ""
    source = pattern.pattern
    if "(?<=" in source or "(?<!" in source or _top_level_alternation(source):
        return ""
    end = 0
    while end < len(source) and source[end] not in _META:
        end += 1
    if end < len(source) and source[end] in _QUANTIFIERS:
        end -= 1  # `ab*`: the quantifier makes `b` optional
    return source[: max(end, 0)]


def _top_level_alternation(source: str) -> bool:
    """Whether `source` has a `|` outside every group (escapes and classes skipped)."""
    depth, at = 0, 0
    while at < len(source):
        char = source[at]
        if char == "\\":
            at += 2
            continue
        if char == "[":
            at = _class_end(source, at)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
        at += 1
    return False


def _class_end(source: str, start: int) -> int:
    """The index after the `]` closing the class opened at `start` (a `]` first is literal)."""
    at = start + 1
    if at < len(source) and source[at] == "^":
        at += 1
    if at < len(source) and source[at] == "]":
        at += 1
    while at < len(source) and source[at] != "]":
        at += 2 if source[at] == "\\" else 1
    return at + 1

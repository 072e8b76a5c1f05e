"""Which lines of a log hold which signature keywords: the pre-filter before any regex.

A substring search per keyword over the whole text costs one pass per keyword (the catalog has
about 120), and that pass was most of a classification's CPU. Logs repeat themselves: a storm's
lines, a periodic message, the same boot line per GPU differ only in their numbers
(timestamps, uptimes, pids). So each line is first reduced to its *shape*, its digits 1-9 made
`0`; the keywords are searched once over the distinct shapes, and a shape's hits are then
checked on its lines. Exact: a keyword in a line is in the line's shape as the keyword's shape
(digits map to digits), and a keyword without digits that is in a shape is in the line itself
(where the shape has anything but a `0`, so has the line); a keyword with a digit is checked
on the line.
A keyword holding a newline (which no line can hold) is searched over the whole text, as it
always was. Pure: no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate

_DIGITS = str.maketrans("123456789", "000000000")


@dataclass(frozen=True)
class KeywordLines:
    """A text's lines, where each starts, and line index -> signatures whose keywords it holds."""

    lines: list[str]
    starts: list[int]
    signatures: dict[int, set[int]]


def keyword_lines(text: str, index: Mapping[str, tuple[int, ...]]) -> KeywordLines:
    """The lines of `text` (split at `\\n`) holding a keyword of `index` (keyword -> signature
    indexes), with those signatures."""
    lines = text.split("\n")
    starts = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    by_shape: dict[str, list[int]] = {}
    for number, shape in enumerate(text.translate(_DIGITS).split("\n")):
        by_shape.setdefault(shape, []).append(number)
    shapes = list(by_shape.values())
    joined = "\n".join(by_shape)
    shape_starts = list(accumulate((len(s) + 1 for s in by_shape), initial=0))
    found: dict[int, set[int]] = {}
    for keyword, shaped, checked, signatures in _prepared(index):
        if shaped is None:  # a keyword across lines
            for start in _hits(text, keyword):
                found.setdefault(bisect_right(starts, start) - 1, set()).update(signatures)
            continue
        for start in _hits(joined, shaped):
            numbers = shapes[bisect_right(shape_starts, start) - 1]
            if checked:
                numbers = [n for n in numbers if keyword in lines[n]]
            for number in numbers:
                found.setdefault(number, set()).update(signatures)
    return KeywordLines(lines=lines, starts=starts, signatures=found)


_Prepared = tuple[str, str | None, bool, tuple[int, ...]]
_PREPARED: dict[int, tuple[Mapping[str, tuple[int, ...]], list[_Prepared]]] = {}


def _prepared(index: Mapping[str, tuple[int, ...]]) -> list[_Prepared]:
    """Per keyword: its shape (None when it holds a newline), whether a hit needs checking on
    the line (it holds a digit), its signatures. Kept per catalog index (a few are loaded)."""
    kept = _PREPARED.get(id(index))
    if kept is not None and kept[0] is index:
        return kept[1]
    prepared = [
        (
            keyword,
            None if "\n" in keyword else keyword.translate(_DIGITS),
            any(digit in keyword for digit in "0123456789"),
            signatures,
        )
        for keyword, signatures in index.items()
    ]
    if len(_PREPARED) >= 16:
        _PREPARED.clear()
    _PREPARED[id(index)] = (index, prepared)
    return prepared


def _hits(text: str, keyword: str) -> list[int]:
    """The start offset of each line where `keyword` begins (a line counted once)."""
    hits = []
    at = text.find(keyword)
    while at >= 0:
        hits.append(text.rfind("\n", 0, at) + 1)
        end = text.find("\n", at + len(keyword))
        at = -1 if end < 0 else text.find(keyword, end + 1)
    return hits

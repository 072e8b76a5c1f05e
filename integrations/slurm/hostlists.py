"""Slurm host lists and index lists, expanded: `gpu-node-[00-03,07]` and `IDX:0-3,6`.

Pure. Slurm writes a job's nodes as a host list (brackets hold comma-separated numbers and
ranges, zero padding kept; several bracketed groups multiply out) and a job's GPUs on a node
as an index list in `gres_detail` (`gpu:h100:4(IDX:0-3)`). Expansion is bounded: a list naming
more than `limit` hosts is refused before anything is expanded.
"""

from __future__ import annotations

import re

from integrations.errors import InvalidName

MAX_HOSTS = 65536
_GROUP = re.compile(r"\[([^\[\]]*)\]")
_GRES_IDX = re.compile(r"\(IDX:([^)]*)\)")


def expand_hostlist(text: str, *, limit: int = MAX_HOSTS) -> list[str]:
    """`gpu-node-[00-03,07],login1` -> the host names, in order. An empty text names none."""
    names: list[str] = []
    for item in _split_top_level(text.strip()):
        names.extend(_expand_item(item, limit=limit - len(names)))
    return names


def expand_indices(text: str) -> list[int]:
    """`0-3,6` -> [0, 1, 2, 3, 6] (GPU indices); `N/A` or "" -> []."""
    text = text.strip()
    if not text or text.upper() == "N/A":
        return []
    indices: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise InvalidName(f"index list '{text[:80]}': '{part}' is not N or N-M")
        indices.extend(range(int(lo), int(hi or lo) + 1))
    return indices


def gres_indices(detail: str) -> list[int]:
    """The GPU indices in one `gres_detail` entry: `gpu:h100:4(IDX:0-3)` -> [0, 1, 2, 3]."""
    found: list[int] = []
    for match in _GRES_IDX.finditer(detail):
        found.extend(expand_indices(match[1]))
    return found


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise InvalidName(f"host list '{text[:80]}': unbalanced ']'")
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    if depth:
        raise InvalidName(f"host list '{text[:80]}': unclosed '['")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, *, limit: int) -> list[str]:
    groups = [_numbers(m[1], item) for m in _GROUP.finditer(item)]
    total = 1
    for group in groups:
        total *= sum(len(range(lo, hi + 1)) for lo, hi, _ in group)
    if total > limit:
        raise InvalidName(f"host list '{item[:80]}' names {total} hosts; at most {MAX_HOSTS}")
    names = [""]
    pieces = _GROUP.split(item)  # text, group, text, group, ..., text
    for position, piece in enumerate(pieces):
        if position % 2 == 0:
            names = [name + piece for name in names]
            continue
        values = [
            f"{n:0{width}d}" for lo, hi, width in _numbers(piece, item) for n in range(lo, hi + 1)
        ]
        names = [name + value for name in names for value in values]
    return names


def _numbers(group: str, item: str) -> list[tuple[int, int, int]]:
    """`00-03,07` -> [(0, 3, 2), (7, 7, 2)]: ranges with their zero-padded width."""
    ranges = []
    for part in group.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise InvalidName(f"host list '{item[:80]}': '{part}' is not N or N-M")
        if hi and int(hi) < int(lo):
            raise InvalidName(f"host list '{item[:80]}': range '{part}' goes backwards")
        ranges.append((int(lo), int(hi or lo), len(lo)))
    return ranges

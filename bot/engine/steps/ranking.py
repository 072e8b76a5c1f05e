"""A signal's samples in summary order (highest value first, then node), without ranking all.

A summary shows its samples highest first, ties by node, then as read: the order of
`sorted(samples, key=lambda s: (-s.value, s.node))`. Only a few of them are ever shown (the
first MAX_SAMPLES, the outliers), so the order is built only for those. Two facts make it cheap
and exact:

- a stable sort of any subset, with the same key, orders it as the whole sorted list does;
- that key sorts as two stable sorts with C keys do (by node, then by value descending; a
  `reverse` sort keeps equal items in order), without a tuple and a Python call per sample.

Neither holds when a value is NaN (it compares false with everything): `Ranking` then sorts
every sample with the tuple key, as the summary always did.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from heapq import nsmallest
from itertools import repeat
from operator import attrgetter

from integrations.telemetry import Sample

_node = attrgetter("node")
_value = attrgetter("value")


def in_order(samples: Iterable[Sample]) -> list[Sample]:
    """`samples` highest value first, ties by node, then in the order given (no NaN)."""
    ordered = sorted(samples, key=_node)
    ordered.sort(key=_value, reverse=True)
    return ordered


def _tuple_key(sample: Sample) -> tuple[float, str]:
    return -sample.value, sample.node


class Ranking:
    """The samples of one read, ranked lazily: its first few, its last, any subset, and its
    values in rank order."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        self.samples = samples
        """As read: the order every order-free aggregate walks (in memory order)."""
        self.values = [s.value for s in samples]
        self._all: list[Sample] | None = None
        self._ranked: list[float] | None = None
        self._first: dict[int, list[Sample]] = {}
        self._ascending: list[float] = []
        """Every value, lowest first (once ranked_values is; without NaN only)."""
        if any(map(math.isnan, self.values)):  # no total order: rank it all, as before
            self._all = sorted(samples, key=_tuple_key)

    def first(self, count: int) -> list[Sample]:
        """The first `count` samples in rank order."""
        found = self._first.get(count)
        if found is None:
            found = self._first[count] = self._first_uncached(count)
        return found

    def _first_uncached(self, count: int) -> list[Sample]:
        if self._all is not None:
            return self._all[:count]
        if len(self.samples) <= count:
            return in_order(self.samples)
        cut = self.ranked_values()[count - 1]  # the count-th highest value
        above = [s for s in self.samples if s.value > cut]  # fewer than `count`
        # Those at the cut (often most of a fleet: every healthy GPU's 0) are alike but for
        # their nodes: the first few by node, as read among one node's (nsmallest is sorted()'s
        # first few, stable), rather than a sort of them all.
        at_cut = [s for s in self.samples if s.value == cut]
        return in_order(above) + nsmallest(count - len(above), at_cut, key=_node)

    def leaders(self) -> dict[str, Sample]:
        """Each node's first sample in rank order: its highest, the first read of equals."""
        first: dict[str, Sample] = {}
        if self._all is not None:
            for sample in self._all:
                first.setdefault(sample.node, sample)
            return first
        for sample in self.samples:
            held = first.get(sample.node)
            if held is None or sample.value > held.value:
                first[sample.node] = sample
        return first

    def last(self) -> Sample:
        """The last sample in rank order: the lowest value, its largest node, its last read."""
        if self._all is not None:
            return self._all[-1]
        self.ranked_values()
        low = self._ascending[0]
        if bisect_right(self._ascending, low) == 1:
            return min(self.samples, key=_value)
        lowest = [s for s in self.samples if s.value == low]
        return max(reversed(lowest), key=_node)  # the largest node, its last read

    def first_above(self, bound: float, count: int) -> list[Sample]:
        """The first `count` samples above `bound`, in rank order (without NaN they lead it)."""
        if self._all is not None:
            return [s for s in self._all if s.value > bound][:count]
        return [s for s in self.first(count) if s.value > bound]

    def above(self, bound: float) -> list[Sample]:
        """The samples above `bound`, in rank order."""
        if self._all is not None:
            return [s for s in self._all if s.value > bound]
        self.ranked_values()
        if bisect_right(self._ascending, bound) == len(self._ascending):
            return []  # the usual answer for an outlier bound: no scan
        return in_order([s for s in self.samples if s.value > bound])

    def below(self, bound: float) -> list[Sample]:
        """The samples below `bound`, in rank order."""
        if self._all is not None:
            return [s for s in self._all if s.value < bound]
        self.ranked_values()
        if bisect_left(self._ascending, bound) == 0:
            return []
        return in_order([s for s in self.samples if s.value < bound])

    def nodes(self) -> list[str]:
        """The nodes in the rank order of their first samples."""
        if self._all is not None:
            return list(dict.fromkeys(s.node for s in self._all))
        return [s.node for s in in_order(self.leaders().values())]

    def ranked_values(self) -> list[float]:
        """Every value in rank order (a zero's sign follows its sample's rank); kept."""
        if self._ranked is None:
            self._ranked = self._rank_values()
        return self._ranked

    def _rank_values(self) -> list[float]:
        if self._all is not None:
            return [s.value for s in self._all]
        ascending = self._ascending = sorted(self.values)  # equals are alike, but ±0.0
        ranked = ascending[::-1]
        low, high = bisect_left(ascending, 0.0), bisect_right(ascending, 0.0)
        if high - low > 1 and _signs_differ(ascending[low:high]):
            zeros = [s.value for s in in_order([s for s in self.samples if s.value == 0.0])]
            ranked[len(ranked) - high : len(ranked) - low] = zeros
        return ranked


def _signs_differ(zeros: list[float]) -> bool:
    """Whether both 0.0 and -0.0 are among `zeros` (only then can their order show)."""
    signs = sum(map(math.copysign, repeat(1.0, len(zeros)), zeros))
    return abs(signs) != len(zeros)

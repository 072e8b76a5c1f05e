"""How a signal's samples spread across nodes: the median, the samples far from it, and which
label values (a driver version, an error code) the nodes share. Pure: no I/O.

"Find the one bad node among many" is a comparison with the peers: a GPU whose clock is far below
the job's median, a rank whose step time is far above it. A sample is an *outlier* when it is
further from the median than both a robust spread (median absolute deviation) and a fraction of
the median allow, so a fleet of identical healthy readings (spread 0) still tolerates jitter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import sub

#: A sample deviating from the median by more than this fraction of it may be an outlier.
OUTLIER_RATIO = 0.15
#: ... and by more than this many (normal-consistent) median absolute deviations.
OUTLIER_MADS = 5.0
#: Scales the MAD so it estimates a standard deviation for normally distributed readings.
_MAD_TO_SIGMA = 1.4826
#: Below this, a deviation is noise whatever the median (counters that all read 0.0).
_EPSILON = 1e-9


def median(values: Sequence[float]) -> float | None:
    """The median of `values` (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2.0


@dataclass(frozen=True)
class Outliers:
    """Indexes (into the values given) of samples far below / far above the median."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    threshold: float


def find_outliers(
    values: Sequence[float], *, ratio: float = OUTLIER_RATIO, mads: float = OUTLIER_MADS
) -> Outliers:
    """Samples deviating from the median by more than max(mads·σ̂, ratio·|median|).

    σ̂ is the median absolute deviation scaled to a standard deviation, so one straggler among
    many peers does not widen the band that finds it.
    """
    band = outlier_band(values, ratio=ratio, mads=mads)
    if band is None:
        return Outliers(low=(), high=(), threshold=0.0)
    center, threshold = band
    low = tuple(i for i, v in enumerate(values) if v < center - threshold)
    high = tuple(i for i, v in enumerate(values) if v > center + threshold)
    return Outliers(low=low, high=high, threshold=threshold)


def outlier_band(
    values: Sequence[float], *, ratio: float = OUTLIER_RATIO, mads: float = OUTLIER_MADS
) -> tuple[float, float] | None:
    """(median, threshold) of `find_outliers`: a sample is an outlier when it is below
    `median - threshold` or above `median + threshold`. None for fewer than 3 values."""
    center = median(values)
    if center is None or len(values) < 3:
        return None
    deviations = list(map(abs, map(sub, values, repeat(center))))  # |v - center|, in C
    mad = median(deviations) or 0.0
    return center, max(mads * _MAD_TO_SIGMA * mad, ratio * abs(center), _EPSILON)


@dataclass(frozen=True)
class LabelSpread:
    """How the nodes divide over the values of one label (e.g. `DCGM_FI_DRIVER_VERSION`)."""

    distinct: tuple[str, ...]
    """Every value seen, most common first."""
    majority: str | None
    """The value most nodes carry."""
    minority_nodes: tuple[str, ...]
    """Nodes carrying any other value (empty when all agree)."""


def label_spread(node_values: Mapping[str, str]) -> LabelSpread:
    """Split nodes by their value of one label: the common value and the nodes that differ.

    Ties go to the value that sorts first, so the answer does not depend on sample order.
    """
    counts = Counter(node_values.values())
    ranked = sorted(counts, key=lambda value: (-counts[value], value))
    majority = ranked[0] if ranked else None
    minority = tuple(sorted(n for n, v in node_values.items() if v != majority))
    return LabelSpread(distinct=tuple(ranked), majority=majority, minority_nodes=minority)

"""The garbage collector's first threshold for a process that runs triage.

A fleet-wide read allocates 10^5 short-lived objects (samples, their labels, summaries) that live
for the read. At CPython's default first threshold (700 allocations) many of them are promoted
before the read ends, and the promotions trigger full collections, each a walk over the whole
heap (catalogs, templates, a simulated fleet's series): about 40 % of a 4,096-member storm run's
CPU, and the reason it grew faster than its members (docs/performance.md, issue 21). A first
threshold of 100,000 (and 20 young collections per middle one) lets a read's objects die young:
a 4,096-member read is 32,768 samples, and its summary's sets, lists and per-node labels are
about 20,000 more, over the 50,000 this was first (two young collections per 4,096-member storm
run, none at 1,024). Cyclic garbage waits a little longer (at most 100,000 allocations) to be
freed.
"""

from __future__ import annotations

import gc

FIRST_THRESHOLD = 100_000
SECOND_THRESHOLD = 20
"""Young collections per middle one (CPython's default is 10)."""


def tune_collector() -> None:
    """Raise the first two thresholds to FIRST_THRESHOLD and SECOND_THRESHOLD (never lower
    one; a disabled collector stays so); the oldest generation keeps its own. Idempotent."""
    first, second, third = gc.get_threshold()
    if first > 0:
        gc.set_threshold(max(first, FIRST_THRESHOLD), max(second, SECOND_THRESHOLD), third)

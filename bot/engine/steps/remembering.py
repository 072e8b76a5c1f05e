"""The localize step's look back: for each GPU a `gpu_hardware` verdict blames, what its fault
history says ("3rd XID 48 on this GPU in 30 days, after 2 resets") and which rung of the
escalation ladder that puts it on (bot.diagnosis.history). Reads the history port only; the
facts of this run are written by the recorder once the verdict is recorded. With telemetry
across the network, the history of every GPU the verdict could blame is read while the
liveness probe asks telemetry (`look_back_ahead`), so the database's answer is not added to the
verdict's wait (issue 21)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from bot.diagnosis.findings import CheckOutcome
from bot.diagnosis.history import WINDOW, GpuFact, climb, culprit_gpus, named_gpus
from bot.diagnosis.localizing import Verdict
from bot.engine.state import Deps

_AHEAD = ThreadPoolExecutor(max_workers=4, thread_name_prefix="history-ahead")
"""Look backs read while the liveness probe asks telemetry (`look_back_ahead`)."""


@dataclass(frozen=True)
class LookBack:
    """The history of some GPUs, being read (`look_back_ahead`)."""

    keys: frozenset[str]
    facts: Future[list[GpuFact]]


def look_back_ahead(outcomes: Sequence[CheckOutcome], deps: Deps) -> LookBack | None:
    """Start reading the history of every GPU the verdict could blame, on a pool, when the
    liveness probe that comes first is a query across the network (`Deps.parallel_reads`):
    the database answers while telemetry does, instead of after it. The verdict blames only
    GPUs that the checks' `gpu_hardware` findings name (the probe can only set findings aside,
    or add one about telemetry), so these are every GPU it could blame; `with_history` reads
    again if not. None when there is nothing to read ahead."""
    if deps.history is None or not deps.parallel_reads:
        return None
    gpus = named_gpus([o.finding for o in outcomes if o.finding is not None])
    if not gpus:
        return None
    keys = [g.gpu_key for g in gpus]
    since = deps.clock.now() - WINDOW  # no later than the look back's: its facts are among these
    return LookBack(frozenset(keys), _AHEAD.submit(deps.history.read, keys, since=since))


def with_history(
    verdict: Verdict, deps: Deps, *, incident: str | None, ahead: LookBack | None = None
) -> Verdict:
    """`verdict` with one history record per culprit GPU, its sentence added to the summary.
    `ahead`: the history read while the probe ran, used when it covers every culprit GPU."""
    gpus = culprit_gpus(verdict)
    if deps.history is None or not gpus:
        return verdict
    now = deps.clock.now()
    keys = [g.gpu_key for g in gpus]
    if ahead is not None and ahead.keys.issuperset(keys):
        facts = ahead.facts.result()
    else:
        facts = deps.history.read(keys, since=now - WINDOW)
    records = [climb(g, facts, now=now, incident=incident) for g in gpus]
    repeated = [r for r in records if r.occurrences > 1 or r.resets]
    told = "; ".join(f"GPU {r.gpu.gpu} on {r.gpu.node}: {r.text}" for r in repeated)
    summary = f"{verdict.summary} ({told})" if told else verdict.summary
    return replace(verdict, history=tuple(r.to_dict() for r in records), summary=summary)

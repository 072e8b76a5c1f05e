"""The localize step's look back: for each GPU a `gpu_hardware` verdict blames, what its fault
history says ("3rd XID 48 on this GPU in 30 days, after 2 resets") and which rung of the
escalation ladder that puts it on (bot.diagnosis.history). Reads the history port only; the
facts of this run are written by the recorder once the verdict is recorded."""

from __future__ import annotations

from dataclasses import replace

from bot.diagnosis.history import WINDOW, climb, culprit_gpus
from bot.diagnosis.localizing import Verdict
from bot.engine.state import Deps


def with_history(verdict: Verdict, deps: Deps, *, incident: str | None) -> Verdict:
    """`verdict` with one history record per culprit GPU, its sentence added to the summary."""
    gpus = culprit_gpus(verdict)
    if deps.history is None or not gpus:
        return verdict
    now = deps.clock.now()
    facts = deps.history.read([g.gpu_key for g in gpus], since=now - WINDOW)
    records = [climb(g, facts, now=now, incident=incident) for g in gpus]
    repeated = [r for r in records if r.occurrences > 1 or r.resets]
    told = "; ".join(f"GPU {r.gpu.gpu} on {r.gpu.node}: {r.text}" for r in repeated)
    summary = f"{verdict.summary} ({told})" if told else verdict.summary
    return replace(verdict, history=tuple(r.to_dict() for r in records), summary=summary)

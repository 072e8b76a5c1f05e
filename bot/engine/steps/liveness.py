"""Is the detector alive? Before a run's verdict counts what dcgm-exporter said, the engine asks
whether its values still move.

A hung DCGM host engine, or a field cache that stopped refreshing, leaves dcgm-exporter answering
every scrape (`up` stays 1) with the values of the moment it froze: the GPUs look healthy
whatever happens to them. `timestamp()` does not show it (the scrape is fresh, the data is
not). The energy counter does: a powered GPU always uses energy, idle too, so a GPU whose
`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` did not increase over the window has a stuck detector.

For the nodes any dcgm signal of the run reported, one query reads that counter. Stuck GPUs
become one `telemetry` finding (critical: "the detector is broken", never "the GPU is broken"),
and a finding that fired on a stuck node's dcgm values alone becomes *unknown*: what a frozen
exporter shows is the past.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from itertools import chain
from typing import Any

from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Evidence, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.spread import OUTLIER_RATIO
from bot.engine.state import Deps
from bot.engine.steps.common import parse_duration
from integrations.errors import TelemetryUnavailable
from integrations.telemetry import Sample, SignalQuery

SIGNAL = "telemetry.dcgm_energy_increase"
CHECK_ID = "telemetry_detector_stuck"


@dataclass(frozen=True)
class Liveness:
    """Stuck GPUs as (node, gpu), the nodes where every GPU is stuck, the outcome to add."""

    stuck: tuple[tuple[str, str], ...] = ()
    nodes: tuple[str, ...] = ()
    outcome: CheckOutcome | None = None


def probe(deps: Deps, steps: Mapping[str, Any]) -> Liveness:
    """Read the energy counter for every node a dcgm signal of the run reported (one query)."""
    dcgm = _dcgm_steps(deps, steps)
    listed = (data.get("present_nodes", []) for data in dcgm.values())  # each one sorted
    nodes = sorted(dict.fromkeys(chain.from_iterable(listed)))  # so in order: one run to sort
    if SIGNAL not in deps.signals or not nodes:
        return Liveness()
    window = max((parse_duration(str(d.get("window") or "15m")) for d in dcgm.values()),
                 default=timedelta(minutes=15))
    try:
        result = deps.telemetry.read(SignalQuery(signal=SIGNAL, nodes=tuple(nodes), window=window))
    except TelemetryUnavailable:
        return Liveness()  # the backend being down is steps.backends' finding, not this one
    stuck, whole = stuck_gpus(result.samples)
    if not stuck:
        return Liveness()
    return Liveness(stuck=stuck, nodes=whole, outcome=_outcome(stuck, whole, window))


def stuck_gpus(samples: Sequence[Sample]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The (node, gpu) whose energy did not increase, sorted, and the nodes where no GPU's did.
    A healthy fleet has none: one pass finds that, and only the nodes with a stuck GPU are
    looked at again (a 4,096-member storm's read is 32,768 samples)."""
    held = [s for s in samples if s.value <= 0]
    if not held:
        return (), ()
    stuck = tuple(sorted((s.node, s.labels.get("gpu", "")) for s in held))
    suspects = {s.node for s in held}
    moving = {s.node for s in samples if s.node in suspects and not s.value <= 0}  # NaN too
    return stuck, tuple(sorted(suspects - moving))


def _dcgm_steps(deps: Deps, steps: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = {}
    for step_id, data in steps.items():
        if not isinstance(data, Mapping) or data.get("kind") != "signal":
            continue
        name = str(data.get("signal", ""))
        if name != SIGNAL and name in deps.signals and deps.signals.get(name).source == "dcgm":
            found[step_id] = data
    return found


def _outcome(
    stuck: Sequence[tuple[str, str]], whole: Sequence[str], window: timedelta
) -> CheckOutcome:
    minutes = int(window.total_seconds() // 60)
    if whole:
        where = ", ".join(whole[:5]) + (f" and {len(whole) - 5} more" if len(whole) > 5 else "")
        summary = (
            f"dcgm-exporter on {where} answers scrapes but its values stopped changing (no GPU "
            f"used any energy in {minutes}m): the detector is stuck, not the GPUs; its GPU "
            "signals are not counted"
        )
        culprit = Culprit(node=whole[0])
    else:
        node, gpu = stuck[0]
        summary = (
            f"DCGM stopped updating GPU {gpu} on {node} (its energy counter did not move in "
            f"{minutes}m): that GPU's readings are stale, the detector is broken"
        )
        culprit = Culprit(node=node, gpu=gpu)
    evidence = tuple(
        Evidence(CHECK_ID, SIGNAL, 0.0, {"node": n, "gpu": g}, unit="mJ") for n, g in stuck[:8]
    )
    nodes = tuple(dict.fromkeys(n for n, _ in stuck))
    finding = Finding(
        CHECK_ID, Layer.TELEMETRY, Severity.CRITICAL, summary, culprit, evidence, affected=nodes
    )
    return CheckOutcome(CHECK_ID, Layer.TELEMETRY, CheckStatus.FIRED, finding)


def discount(
    outcomes: Sequence[CheckOutcome], liveness: Liveness, *, dcgm_signals: frozenset[str]
) -> list[CheckOutcome]:
    """Outcomes with the findings that rest only on a stuck node's dcgm values made unknown."""
    if not liveness.nodes:
        return list(outcomes)
    stuck = set(liveness.nodes)
    out = []
    for outcome in outcomes:
        finding = outcome.finding
        rests_on_dcgm = (
            finding is not None
            and finding.culprit.node in stuck
            and bool(finding.evidence)
            and all(e.what in dcgm_signals or _like_peers(e) for e in finding.evidence)
        )
        if rests_on_dcgm:
            names = tuple(sorted({e.what for e in finding.evidence})) if finding else ()
            outcome = replace(outcome, status=CheckStatus.UNKNOWN, finding=None,
                              missing_signals=names)
        out.append(outcome)
    return out


def _like_peers(row: Evidence) -> bool:
    """A non-dcgm reading that does not stand out from its peers' median supports nothing: a
    straggler named from a frozen tensor-activity gauge is not rescued by a normal step time."""
    if row.peer_median is None or not isinstance(row.value, int | float):
        return False
    return abs(float(row.value) - row.peer_median) <= OUTLIER_RATIO * abs(row.peer_median)


def dcgm_signal_names(deps: Deps) -> frozenset[str]:
    """Every catalog signal read from dcgm-exporter."""
    return frozenset(n for n in deps.signals.names() if deps.signals.get(n).source == "dcgm")


def stuck_notes(liveness: Liveness) -> tuple[str, ...]:
    """Lines for the verdict's `detectors`: which exporters or GPUs stopped updating."""
    if not liveness.stuck:
        return ()
    if liveness.nodes:
        return tuple(
            f"dcgm-exporter on {n}: values frozen (energy counter flat); its readings not counted"
            for n in liveness.nodes
        )
    return tuple(f"DCGM on {n} GPU {g}: readings frozen" for n, g in liveness.stuck[:8])

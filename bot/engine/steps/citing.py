"""Evidence rows for a finding: the culprit's own samples, with its peers' median beside them,
and whether the culprit stands out from its peers at all.

A check that names "GPU 7 on gpu-node-37" must be backed by GPU 7 on gpu-node-37's reading, not
by the first three series of the signal (which, sorted by value, are the healthy GPUs when the
culprit is the one reading *low*). Samples are picked by the culprit's labels: the node, then
`gpu` (or `UUID`) for a GPU culprit, `device` (`mlx5_5`, or `mlx5_5:1` with its port) for an HCA.
When the culprit is a workload, or nothing matches it, the rows are the samples above zero, as
before. A finding naming devices on many nodes (`members`: a storm's GPU 4 on eight nodes) gets
each member's own samples, and its peers are the samples of no member. Reads only the JSON step
outputs of steps.gather; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.diagnosis.findings import Culprit, Evidence
from bot.diagnosis.spread import median

#: Rows per signal read: the culprit's samples (an 8-GPU node at most) or the samples above zero.
MAX_ROWS = 8
#: A culprit is judged against its peers only when at least this many other nodes were read.
MIN_PEER_NODES = 2
#: Rows of a finding with many members (one device per node): at most this many in all.
MAX_MEMBER_ROWS = 32


@dataclass(frozen=True)
class Cited:
    """The rows, and whether the culprit is an outlier among its peers (None: no peers read)."""

    rows: tuple[Evidence, ...]
    outlier: bool | None


def cite(
    steps: Mapping[str, Any],
    reads: list[str],
    *,
    culprit: Culprit,
    unit_of: Callable[[str], str],
    members: Sequence[Culprit] = (),
) -> Cited:
    """Evidence rows from the outputs of the steps a check read, chosen for `culprit`, or for
    each of `members` when the finding names devices on many nodes."""
    if members:
        return _cite_members(steps, reads, members=members, unit_of=unit_of)
    rows: list[Evidence] = []
    verdicts: list[bool] = []
    for name in reads:
        data = steps.get(name, {})
        if data.get("kind") == "signal":
            rows.extend(_signal_rows(name, data, culprit=culprit, unit=unit_of(data["signal"])))
            judged = _stands_out(data, culprit)
            if judged is not None:
                verdicts.append(judged)
        elif data.get("kind") == "cluster":
            rows.extend(_cluster_rows(name, data))
    return Cited(rows=tuple(rows[: MAX_ROWS * 2]), outlier=_any_outlier(verdicts))


def _cite_members(
    steps: Mapping[str, Any],
    reads: list[str],
    *,
    members: Sequence[Culprit],
    unit_of: Callable[[str], str],
) -> Cited:
    """One row per member sample (each culprit's own series, in the members' order), the
    peers' median taken over the samples of no member; an outlier when any member is one."""
    rows: list[Evidence] = []
    verdicts: list[bool] = []
    for name in reads:
        data = steps.get(name, {})
        if data.get("kind") == "cluster":
            rows.extend(_cluster_rows(name, data))
        if data.get("kind") != "signal":
            continue
        samples = _samples(data)
        mine = [[s for s in samples if _matches(s, m)] for m in members]
        theirs = [s["value"] for s in samples if not any(s in own for own in mine)]
        complete = len(samples) >= int(data.get("count", 0))
        peer_median = median(theirs) if complete else data.get("median")
        count = sum(len(own) for own in mine)
        peers = len(theirs) if complete else max(0, int(data.get("count", 0)) - count)
        unit = unit_of(data["signal"])
        for own in mine:
            rows.extend(
                _row(name, data, s, unit=unit, peer_median=peer_median if peers else None,
                     peers=peers)
                for s in own
            )
        verdicts.extend(v for v in (_stands_out(data, m) for m in members) if v is not None)
    return Cited(rows=tuple(rows[:MAX_MEMBER_ROWS]), outlier=_any_outlier(verdicts))


def _any_outlier(verdicts: Sequence[bool]) -> bool | None:
    return True if any(verdicts) else (False if verdicts else None)


def _samples(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every sample the summary kept (top values, outliers, above zero), each once."""
    seen: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for key in ("samples", "low_outliers", "high_outliers", "over_zero"):
        for sample in data.get(key, []):
            ident = tuple(sorted((k, str(v)) for k, v in sample.items() if k != "value"))
            seen.setdefault(ident, sample)
    return list(seen.values())


def _matches(sample: Mapping[str, Any], culprit: Culprit) -> bool:
    if sample.get("node") != culprit.node:
        return False
    if culprit.gpu not in (None, "") and str(sample.get("gpu")) != culprit.gpu:
        return culprit.uuid is not None and sample.get("UUID") == culprit.uuid
    if culprit.hca:
        device, _, port = culprit.hca.partition(":")
        if sample.get("device") != device or (port and str(sample.get("port")) != port):
            return False
    return True


def _signal_rows(
    step: str, data: Mapping[str, Any], *, culprit: Culprit, unit: str
) -> list[Evidence]:
    samples = _samples(data)
    mine = [s for s in samples if culprit.node and _matches(s, culprit)]
    if not mine:
        return [_row(step, data, s, unit=unit) for s in data.get("over_zero", [])[:MAX_ROWS]]
    others = [s["value"] for s in samples if s not in mine]
    complete = len(samples) >= int(data.get("count", 0))
    peer_median = median(others) if complete else data.get("median")
    peers = len(others) if complete else max(0, int(data.get("count", 0)) - len(mine))
    return [
        _row(step, data, s, unit=unit, peer_median=peer_median if peers else None, peers=peers)
        for s in mine[:MAX_ROWS]
    ]


def _row(
    step: str,
    data: Mapping[str, Any],
    sample: Mapping[str, Any],
    *,
    unit: str,
    peer_median: float | None = None,
    peers: int = 0,
) -> Evidence:
    labels = {k: str(v) for k, v in sample.items() if k not in ("node", "value")}
    labels["node"] = str(sample["node"])
    return Evidence(
        step,
        str(data["signal"]),
        sample["value"],
        labels,
        unit=unit,
        peer_median=peer_median,
        peers=peers,
    )


def _stands_out(data: Mapping[str, Any], culprit: Culprit) -> bool | None:
    """True when the culprit is among the signal's outliers (by value, or by a kept label such
    as the driver version, where it is in the minority); False when enough other nodes were
    read and it is not; None when it cannot be judged (no culprit node, too few peers)."""
    if not culprit.node:
        return None
    minorities = (data.get("minority_nodes") or {}).values()
    if any(culprit.node in nodes for nodes in minorities):
        return True
    outliers = [*data.get("low_outliers", []), *data.get("high_outliers", [])]
    if any(_matches(s, culprit) for s in outliers):
        return True
    peers = set(data.get("present_nodes", [])) - {culprit.node}
    mine = any(_matches(s, culprit) for s in _samples(data))
    return False if mine and len(peers) >= MIN_PEER_NODES else None


def _cluster_rows(step: str, data: Mapping[str, Any]) -> list[Evidence]:
    rows = [Evidence(step, m["signature"], m["line"]) for m in data.get("matches", [])[:MAX_ROWS]]
    if data.get("read") == "node" and data.get("conditions"):
        conditions = {k: str(v) for k, v in data["conditions"].items()}
        rows.append(Evidence(step, "node.conditions", None, conditions))
    return rows

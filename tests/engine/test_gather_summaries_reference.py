"""Signal summaries computed the cheaper way are the summaries the old code computed.

Covers: on generated readings (nodes with fewer samples than their peers, GPUs and HCAs, labels
named `node` or `value`, kept labels, negative and fractional values, bitmask signals, missing
nodes), `summarize_signal` equals the reference kept below as it was before issue 21 item 2,
key for key and in the same order; so do `_sparse_nodes` and `_gone` as the signal node calls
them on held samples. On generated fleets (up to 60 nodes of up to 8 GPUs, GPUs gone, samples
without a `gpu` label or with a `node` label, values mostly tied, 0.0 beside -0.0, NaN, huge
values; shuffled), the summary ranking only what it shows (issue 21 item 1) has the old
summary's repr, to the bit.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.diagnosis.spread import OUTLIER_RATIO, find_outliers, label_spread, median
from bot.engine.steps.common import format_window
from bot.engine.steps.gather import MAX_SAMPLES, _gone, _sparse_nodes, summarize_signal
from integrations.telemetry import Sample, SignalResult

BITMASK_BITS = 9

# --- the reference: bot/engine/steps/gather.py's summary as it was ---------------------------


def old_summarize_signal(
    result: SignalResult,
    *,
    nodes: list[str],
    window: timedelta,
    error: str | None = None,
    keep_labels: tuple[str, ...] = (),
    outlier_ratio: float = OUTLIER_RATIO,
    bitmask: bool = False,
) -> dict[str, Any]:
    """Turn a SignalResult into the JSON-safe summary expressions read. A `bitmask` signal
    (unit `bitmask`, e.g. clock-event reasons) also gets `bit_nodes`: bit -> nodes with it set."""
    samples = sorted(result.samples, key=lambda s: (-s.value, s.node))
    values = [s.value for s in samples]
    missing = not samples
    over_zero = [old_sample_dict(s) for s in samples if s.value > 0]
    summary: dict[str, Any] = {
        "signal": result.signal,
        "nodes": nodes,
        "window": format_window(window),
        "count": len(samples),
        "max": max(values) if values else None,
        "min": min(values) if values else None,
        "sum": sum(values) if values else None,
        "median": median(values),
        "any": (len(over_zero) > 0) if values else None,
        "argmax": old_sample_dict(samples[0]) if samples else {},
        "argmin": old_sample_dict(samples[-1]) if samples else {},
        "over_zero": over_zero[:MAX_SAMPLES],
        "over_zero_nodes": sorted({s["node"] for s in over_zero}),
        "zero_nodes": sorted({s.node for s in samples if s.value <= 0}),
        "present_nodes": sorted({s.node for s in samples}),
        "sparse_nodes": old_sparse_nodes(samples),
        "gone": old_gone(samples),
        "samples": [old_sample_dict(s) for s in samples[:MAX_SAMPLES]],
        "missing": missing,
        "missing_nodes": list(result.missing_nodes),
        "queries": result.queries,
        **old_outliers(samples, ratio=outlier_ratio),
        **old_label_spreads(samples, keep_labels),
        **({"bit_nodes": old_bit_nodes(samples)} if bitmask else {}),
    }
    if error:
        summary["error"] = error
    return summary


def old_sparse_nodes(samples: list[Sample]) -> list[str]:
    """Nodes with fewer samples than most nodes have: a GPU or port gone from the exporter
    (fallen off the bus) while the rest of the node still reports."""
    per_node = Counter(s.node for s in samples)
    if not per_node:
        return []
    usual = Counter(per_node.values()).most_common(1)[0][0]
    return sorted(n for n, count in per_node.items() if count < usual)


def old_gone(samples: list[Sample]) -> list[dict[str, str]]:
    """On each sparse node, the GPUs (`gpu` label) or HCAs (`device`) the other nodes report
    and it does not: `[{node, gpu}]` for the GPU that fell off the bus."""
    sparse = old_sparse_nodes(samples)
    if not sparse:
        return []
    key = "gpu" if any("gpu" in s.labels for s in samples) else "device"
    usual = {s.labels[key] for s in samples if key in s.labels and s.node not in sparse}
    gone: list[dict[str, str]] = []
    for node in sparse:
        present = {s.labels.get(key) for s in samples if s.node == node}
        gone += [{"node": node, key: v} for v in sorted(usual - present)]
    return gone[:MAX_SAMPLES]


def old_outliers(samples: list[Sample], *, ratio: float) -> dict[str, Any]:
    """Samples far below / above the median, and the nodes they are on (see diagnosis.spread)."""
    found = find_outliers([s.value for s in samples], ratio=ratio)
    low = [samples[i] for i in reversed(found.low)]  # furthest from the median first
    high = [samples[i] for i in found.high]
    return {
        "low_outliers": [old_sample_dict(s) for s in low[:MAX_SAMPLES]],
        "low_outlier_nodes": sorted({s.node for s in low}),
        "high_outliers": [old_sample_dict(s) for s in high[:MAX_SAMPLES]],
        "high_outlier_nodes": sorted({s.node for s in high}),
    }


def old_label_spreads(samples: list[Sample], labels: tuple[str, ...]) -> dict[str, Any]:
    """For each kept label: its distinct values, the majority value, the nodes that differ,
    and each node's value (from the node's first sample), for cross-node correlation."""
    if not labels:
        return {}
    node_labels: dict[str, dict[str, str]] = {}
    for sample in sorted(samples, key=lambda s: s.node):
        node_labels.setdefault(
            sample.node, {k: sample.labels[k] for k in labels if k in sample.labels}
        )
    distinct, majority, minority = {}, {}, {}
    for label in labels:
        spread = label_spread({n: v[label] for n, v in node_labels.items() if label in v})
        distinct[label] = list(spread.distinct)
        majority[label] = spread.majority
        minority[label] = list(spread.minority_nodes)
    return {
        "distinct": distinct,
        "majority": majority,
        "minority_nodes": minority,
        "node_labels": node_labels,
    }


def old_bit_nodes(samples: list[Sample]) -> dict[str, list[str]]:
    """For each of the 9 low bits (0x1 .. 0x100, every key always present so a check can index
    it), the nodes where some sample has it set."""
    found: dict[str, set[str]] = {str(1 << b): set() for b in range(BITMASK_BITS)}
    for sample in samples:
        value = int(sample.value)
        for b in range(BITMASK_BITS):
            if value >> b & 1:
                found[str(1 << b)].add(sample.node)
    return {bit: sorted(nodes) for bit, nodes in found.items()}


def old_sample_dict(sample: Sample) -> dict[str, Any]:
    return {"node": sample.node, "value": sample.value, **sample.labels}


# --- generated readings -------------------------------------------------------------------------

nodes = st.sampled_from([f"gpu-node-{i:02d}" for i in range(6)])
label_values = st.sampled_from(["0", "1", "3", "x", "550.54.15"])
label_names = st.sampled_from(["gpu", "device", "node", "value", "err_code", "UUID"])
labels = st.dictionaries(label_names, label_values, max_size=3)
values = st.one_of(
    st.sampled_from([0.0, 1.0, 48.0, 136.0, -3.0, 0.5]), st.floats(-1e6, 1e6, allow_nan=False)
)
samples = st.lists(st.builds(Sample, nodes, values, labels), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    found=samples,
    missing=st.lists(nodes, max_size=3),
    keep=st.lists(st.sampled_from(["gpu", "err_code", "UUID"]), max_size=2, unique=True),
    bitmask=st.booleans(),
    ratio=st.sampled_from([OUTLIER_RATIO, 0.1]),
)
def test_the_summary_is_what_the_old_summary_was(
    found: list[Sample], missing: list[str], keep: list[str], bitmask: bool, ratio: float
) -> None:
    result = SignalResult(signal="s", samples=tuple(found), missing_nodes=tuple(missing))
    kwargs: dict[str, Any] = {"nodes": ["gpu-node-00"], "window": timedelta(minutes=15),
                              "keep_labels": tuple(keep), "outlier_ratio": ratio,
                              "bitmask": bitmask}  # fmt: skip
    new, old = summarize_signal(result, **kwargs), old_summarize_signal(result, **kwargs)
    assert list(new.items()) == list(old.items())
    assert list(new.get("node_labels", {})) == list(old.get("node_labels", {}))


@settings(max_examples=200, deadline=None)
@given(found=samples)
def test_sparse_nodes_and_gone_gpus_are_what_they_were(found: list[Sample]) -> None:
    assert _sparse_nodes(found) == old_sparse_nodes(found)
    assert _gone(found) == old_gone(found)


# --- fleets: many nodes, GPUs and ties, read in any order ---------------------------------------

FLEET_VALUES = [0.0, -0.0, 1.0, 48.0, 79.0, -3.0, 0.5, 136.0, 1e300, -1e300, float("nan")]


@st.composite
def fleet_reads(draw: st.DrawFn) -> list[Sample]:
    """A fleet's read: up to 60 nodes of up to 8 GPUs (some GPUs gone, some samples without a
    `gpu` label, some with a `node` label), values mostly from a few (ties, both zeros, NaN
    now and then), in a shuffled order."""
    nan = draw(st.booleans()) and draw(st.booleans())
    pool = FLEET_VALUES if nan else FLEET_VALUES[:-1]
    value = st.one_of(st.sampled_from(pool), st.floats(-1e3, 1e3, allow_nan=False))
    found: list[Sample] = []
    for n in range(draw(st.integers(0, 60))):
        node = f"gpu-node-{n:03d}"
        driver = draw(st.sampled_from(["550.54.15", "550.54.15", "535.104.05"]))
        for gpu in range(draw(st.sampled_from([8, 8, 8, 7, 1, 0]))):
            labels = {"gpu": str(gpu), "DCGM_FI_DRIVER_VERSION": driver}
            if draw(st.integers(0, 30)) == 0:
                labels = draw(st.sampled_from([{}, {"node": "gpu-node-999"}, {"device": "x"}]))
            found.append(Sample(node, draw(value), labels))
    return draw(st.permutations(found))


@settings(max_examples=60, deadline=None)
@given(
    found=fleet_reads(),
    keep=st.sampled_from([(), ("DCGM_FI_DRIVER_VERSION",), ("gpu", "DCGM_FI_DRIVER_VERSION")]),
    bitmask=st.booleans(),
)
def test_a_fleets_summary_is_what_the_old_summary_was_to_the_bit(
    found: list[Sample], keep: tuple[str, ...], bitmask: bool
) -> None:
    """repr, not ==: -0.0 and 0.0 must land where they did, and NaN must match NaN (a NaN
    bitmask fails both, as int(nan) does)."""
    result = SignalResult(signal="s", samples=tuple(found), missing_nodes=("gpu-node-500",))
    kwargs: dict[str, Any] = {"nodes": ["gpu-node-000"], "window": timedelta(minutes=15),
                              "keep_labels": keep, "bitmask": bitmask}  # fmt: skip
    new, old = (
        outcome(summarize_signal, result, kwargs),
        outcome(old_summarize_signal, result, kwargs),
    )
    assert new == old


def outcome(summarize: Any, result: SignalResult, kwargs: dict[str, Any]) -> str:
    try:
        return repr(summarize(result, **kwargs))
    except ValueError as exc:
        return f"ValueError: {exc}"

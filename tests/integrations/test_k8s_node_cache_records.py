"""The node cache's own reading of a Node's JSON (`slim_node`) says what the adapter's reading of
the client's model (`node_info`) says about every field the limits and the impact read use, for
generated nodes; its label selection is a metav1.LabelSelector's (equality; None: DoesNotExist),
through its label index, after any sequence of events and of the bot's own writes (each node at
its newest resourceVersion, whatever the order they come in)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from integrations.cluster import count_of
from integrations.k8s.node_cache import NodeCache, slim_node
from integrations.k8s_records import node_info
from integrations.selectors import matches

_key = st.from_regex(r"[a-z]([a-z0-9.-]{0,10}[a-z0-9])?(/[a-z][a-z0-9-]{0,8})?", fullmatch=True)
_value = st.from_regex(r"([a-z0-9]([a-z0-9._-]{0,8}[a-z0-9])?)?", fullmatch=True)
_status = st.sampled_from(["True", "False", "Unknown"])
_gpus = st.one_of(st.none(), st.integers(0, 16).map(str), st.just("2k"))


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": draw(_status)}] if draw(st.booleans()) else []
    conditions += [{"type": "MemoryPressure", "status": draw(_status)}]
    taints = draw(
        st.lists(
            st.fixed_dictionaries(
                {"key": _key, "effect": st.sampled_from(["NoSchedule", "NoExecute"])},
                optional={"value": _value},
            ),
            max_size=3,
        )
    )
    capacity, allocatable = draw(_gpus), draw(_gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)),
            "resourceVersion": "42",
            "labels": draw(st.dictionaries(_key, _value, max_size=4)),
            "annotations": {"big": "x" * 100},
        },
        "spec": {"unschedulable": draw(st.booleans()), "taints": taints},
        "status": {
            "conditions": conditions,
            "capacity": {} if capacity is None else {"nvidia.com/gpu": capacity},
            "allocatable": {} if allocatable is None else {"nvidia.com/gpu": allocatable},
        },
    }


def _model(item: dict[str, Any]) -> Any:
    deserialize: Any = client.ApiClient()._ApiClient__deserialize  # type: ignore[attr-defined]
    return deserialize(item, "V1Node")


@given(nodes())
def test_slim_node_reads_what_node_info_reads(item: dict[str, Any]) -> None:
    slim, full = slim_node(item), node_info(_model(item))
    assert (slim.name, slim.ready, slim.unschedulable, slim.labels, slim.taints) == (
        full.name,
        full.ready,
        full.unschedulable,
        full.labels,
        full.taints,
    )
    assert (slim.gpu_capacity, slim.gpu_allocatable) == (full.gpu_capacity, full.gpu_allocatable)
    assert slim.conditions.get("Ready") == full.conditions.get("Ready")
    assert slim.annotations == {}  # not kept: memory


_few_keys = st.sampled_from(["pool", "gpu-oncall.io/rack", "zone"])
_few_values = st.sampled_from(["a", "b", ""])


@st.composite
def small_nodes(draw: st.DrawFn) -> dict[str, Any]:
    """A few names and labels, so that changes collide and selectors match."""
    return {
        "metadata": {
            "name": draw(st.sampled_from(["n1", "n2", "n3", "n4"])),
            "labels": draw(st.dictionaries(_few_keys, _few_values, max_size=3)),
        },
        "spec": {"unschedulable": draw(st.booleans())},
    }


_changes = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED", "wrote"]),
        small_nodes(),
        st.integers(1, 30),
    ),
    max_size=12,
)


@given(
    _changes, st.dictionaries(_few_keys, st.one_of(st.none(), _few_values), max_size=3), _changes
)
def test_selection_is_the_label_selectors(first: Any, wanted: Any, then: Any) -> None:
    cache = NodeCache(api=None)  # type: ignore[arg-type]  # selection needs no transport
    newest: dict[str, tuple[int, dict[str, Any] | None]] = {}  # name: (version, item)
    cache._connected = True
    for changes in (first, then):  # the index is built by the first select, kept by `then`
        for kind, item, version in changes:
            item["metadata"]["resourceVersion"] = str(version)
            name = item["metadata"]["name"]
            if kind == "wrote":  # applied only over an older version of a node the cache holds
                held = newest.get(name, (0, None))
                if held[1] is not None and version > held[0]:
                    newest[name] = (version, item)
                assert cache.wrote(item) == (held[1] is not None)
            elif kind == "DELETED":
                newest.pop(name, None)
                cache._apply({"type": kind, "object": item})
            else:
                if version > newest.get(name, (0, None))[0]:
                    newest[name] = (version, item)
                cache._apply({"type": kind, "object": item})
        chosen = [n.name for n in cache.select(wanted, wanted=0) or []]
        selector = {  # the same selection as a metav1.LabelSelector (integrations.selectors)
            "matchLabels": {k: v for k, v in wanted.items() if v is not None},
            "matchExpressions": [
                {"key": k, "operator": "DoesNotExist"} for k, v in wanted.items() if v is None
            ],
        }
        expected = sorted(
            name
            for name, (_, item) in newest.items()
            if item is not None and matches(selector, item["metadata"]["labels"])
        )
        assert chosen == expected


@given(
    _changes,
    st.dictionaries(_few_keys, st.one_of(st.none(), _few_values), max_size=3),
    st.integers(1, 5),
    _changes,
)
def test_a_bounded_read_is_the_first_of_the_selection_in_name_order(
    first: Any, wanted: Any, limit: int, then: Any
) -> None:
    """`first` (a pool's first few nodes, from the sorted index) equals the first `limit` of
    the full selection, with its size, after any events: before the index is built and after
    it is kept through changes."""
    cache = NodeCache(api=None)  # type: ignore[arg-type]  # selection needs no transport
    cache._connected = True
    for changes in (first, then):
        _apply(cache, changes)
        every = cache.select(wanted, wanted=0)
        sample = cache.first(wanted, limit=limit, wanted=0)
        assert every is not None and sample is not None
        assert [n.name for n in every] == sorted(n.name for n in every)
        assert sample.nodes == tuple(every[:limit])
        assert sample.total == len(every)
        assert sample.partial == (len(every) > limit)


def _apply(cache: NodeCache, changes: Any) -> None:
    """Watch events and the bot's own writes (`wrote`), in order."""
    for kind, item, version in changes:
        item["metadata"]["resourceVersion"] = str(version)
        if kind == "wrote":
            cache.wrote(item)
        else:
            cache._apply({"type": kind, "object": item})


@st.composite
def counted_nodes(draw: st.DrawFn) -> dict[str, Any]:
    """`small_nodes` with a Ready condition and GPUs, so the counts have something to count."""
    item = draw(small_nodes())
    pool = draw(st.sampled_from(["a", "b", None]))
    if pool is not None:  # most nodes in one of two pools, so that changes move between them
        item["metadata"]["labels"]["pool"] = pool
    gpus = draw(st.integers(0, 8))
    ready = {"type": "Ready", "status": draw(_status)}
    item["status"] = {"conditions": [ready], "capacity": {"nvidia.com/gpu": str(gpus)}}
    return item


_counted_changes = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED", "wrote"]),
        counted_nodes(),
        st.integers(1, 30),
    ),
    max_size=20,
)


@settings(max_examples=200)
@given(
    _counted_changes,
    st.one_of(
        st.fixed_dictionaries({"pool": st.sampled_from(["a", "b"])}),
        st.dictionaries(_few_keys, st.one_of(st.none(), _few_values), min_size=1, max_size=2),
    ),
    _counted_changes,
)
def test_the_counts_kept_per_label_value_are_the_selections(
    first: Any, wanted: Any, then: Any
) -> None:
    """`count` (a pool's nodes, GPUs and cordoned or NotReady members, kept per label value as
    events are applied) equals the count of the full selection after any events: before the
    index is built and after it is kept through changes, moves between values and deletions."""
    cache = NodeCache(api=None)  # type: ignore[arg-type]  # counting needs no transport
    cache._connected = True
    for changes in (first, then):
        _apply(cache, changes)
        every = cache.select(wanted, wanted=0)
        assert every is not None
        assert cache.count(wanted, wanted=0) == count_of(every)

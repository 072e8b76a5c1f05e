"""Import cycles among the packages' modules, counting every import: at run time, inside
functions and under `TYPE_CHECKING` (grimp's graph, the one `lint-imports` builds).

Aspects: bot, integrations and storage form no cycle at all; the simulator holds exactly the one
known group (its fault, workload and scenario modules, typing-only edges: issue 18's follow-up),
so a new cycle anywhere, or a grown simulator group, fails here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set

import grimp

PACKAGES = ("bot", "integrations", "storage", "simulator")
KNOWN_SIMULATOR_GROUP = frozenset(
    {
        "simulator.fabric_faults",
        "simulator.fault_base",
        "simulator.faults",
        "simulator.gpu_faults",
        "simulator.metric_base",
        "simulator.node_faults",
        "simulator.scenario_checks",
        "simulator.scenarios",
        "simulator.serving",
        "simulator.serving_faults",
        "simulator.training",
        "simulator.training_faults",
        "simulator.workload_faults",
        "simulator.workloads",
    }
)
"""Left to undo: `metric_base` and `scenario_checks` name `workloads` and `scenarios` for typing."""


def cycles(edges: Mapping[str, Set[str]]) -> Iterator[frozenset[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    yield frozenset(group)


def test_the_cycle_finder_finds_a_cycle_and_nothing_else() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert list(cycles(edges)) == [frozenset({"a", "b", "c"})]


def test_no_import_cycle_but_the_known_simulator_group() -> None:
    graph = grimp.build_graph(*PACKAGES)
    modules = graph.modules
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    found = list(cycles(edges))
    assert [g for g in found if not g <= KNOWN_SIMULATOR_GROUP] == []
    assert all(g == KNOWN_SIMULATOR_GROUP for g in found)

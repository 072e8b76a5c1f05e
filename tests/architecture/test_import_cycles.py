"""Import cycles among the packages' modules, counting every import: at run time, inside
functions and under `TYPE_CHECKING` (grimp's graph, the one `lint-imports` builds).

Aspect: bot, integrations, storage and the simulator form no cycle at all, so a new one anywhere
fails here. (The simulator's last group of 14 modules went when the words fault kinds and metrics
share moved down into `entities.py`, and the scenario models into `scenario_specs.py`.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set

import grimp

PACKAGES = ("bot", "integrations", "storage", "simulator")


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


def test_no_import_cycle_anywhere() -> None:
    graph = grimp.build_graph(*PACKAGES)
    modules = graph.modules
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    assert [sorted(group) for group in cycles(edges)] == []

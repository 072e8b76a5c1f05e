"""The checks a scenario must pass beyond its schema: every reference resolves in its fleet.

Nodes, racks, leaves and workloads named by faults, triggers and ground truth must exist; a
fault's target fields must fit its kind (a GPU for GPU faults, an inference service for a
service fault, a node of the workload for a pinned workload fault). Yields (field path,
problem) pairs; `scenarios.parse_scenario` turns the first into a ScenarioError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from integrations.names import expand_nodes
from simulator.faults import FAULT_KINDS
from simulator.topology import NODE_PREFIX, node_name_width

if TYPE_CHECKING:
    from simulator.scenario_specs import FaultSpec, Scenario


def reference_problems(s: Scenario) -> Iterator[tuple[str, str]]:
    known = set(s.fleet.node_names)
    yield from _workload_problems(s, known)
    workloads = {w.name for w in s.fleet.workloads}
    for i, fault in enumerate(s.faults):
        yield from _fault_problems(s, fault, where=f"faults.{i}", known=known, workloads=workloads)
    yield from _trigger_problems(s, known)
    if s.expect is not None:
        for i, culprit in enumerate(s.expect.culprits):
            if culprit.startswith(NODE_PREFIX) and culprit not in known:
                yield f"expect.culprits.{i}", _unknown_node(culprit, s)
        yield from _device_problems(s, known)


def _device_problems(s: Scenario, known: set[str]) -> Iterator[tuple[str, str]]:
    """`expect.gpus` / `expect.hcas` name devices that exist (`gpu-node-09:3`, `...:mlx5_2`)."""
    assert s.expect is not None
    sizes = {"gpus": s.fleet.gpus_per_node, "hcas": s.fleet.hcas_per_node}
    for field, refs in (("gpus", s.expect.gpus), ("hcas", s.expect.hcas)):
        for i, ref in enumerate(refs):
            node, _, device = ref.rpartition(":")
            index = int(device.removeprefix("mlx5_"))
            if node not in known:
                yield f"expect.{field}.{i}", _unknown_node(node, s)
            elif index >= sizes[field]:
                yield f"expect.{field}.{i}", _out_of_range(field[:-1], index, count=sizes[field])


def _workload_problems(s: Scenario, known: set[str]) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for i, workload in enumerate(s.fleet.workloads):
        if workload.name in seen:
            yield f"fleet.workloads.{i}.name", f"duplicate workload name '{workload.name}'"
        seen.add(workload.name)
        for node in workload.node_names:
            if node not in known:
                yield f"fleet.workloads.{i}.nodes", _unknown_node(node, s)


def _fault_problems(
    s: Scenario, fault: FaultSpec, *, where: str, known: set[str], workloads: set[str]
) -> Iterator[tuple[str, str]]:
    kind = FAULT_KINDS[fault.kind]
    yield from _group_problems(s, fault, where=where, known=known)
    required = {
        "gpu": ("node", "gpu"),
        "hca": ("node", "hca"),
        "node": ("node",),
        "workload": ("workload",),
    }[kind.target]
    if fault.group is not None:
        required = tuple(r for r in required if r not in ("node", "hca"))
    for name in (*required, *sorted(kind.needs)):
        if getattr(fault, name) is None:
            yield f"{where}.{name}", f"{fault.kind} needs '{name}'"
    if fault.gpu is not None and kind.target != "gpu" and not kind.accepts_gpu:
        yield f"{where}.gpu", f"{fault.kind} targets a {kind.target}, not a GPU"
    if fault.hca is not None and kind.target != "hca":
        yield f"{where}.hca", f"{fault.kind} targets a {kind.target}, not an HCA"
    if fault.node is not None and fault.node not in known:
        yield f"{where}.node", _unknown_node(fault.node, s)
    if fault.gpu is not None and fault.gpu >= s.fleet.gpus_per_node:
        yield f"{where}.gpu", _out_of_range("GPU", fault.gpu, count=s.fleet.gpus_per_node)
    if fault.hca is not None and fault.hca >= s.fleet.hcas_per_node:
        yield f"{where}.hca", _out_of_range("HCA", fault.hca, count=s.fleet.hcas_per_node)
    if fault.workload is not None and fault.workload not in workloads:
        names = ", ".join(sorted(workloads)) or "none defined"
        yield f"{where}.workload", f"unknown workload '{fault.workload}' (workloads: {names})"
    elif fault.workload is not None and kind.workload_kind is not None:
        spec = next(w for w in s.fleet.workloads if w.name == fault.workload)
        if spec.kind != kind.workload_kind:
            fitting = sorted(w.name for w in s.fleet.workloads if w.kind == kind.workload_kind)
            yield (
                f"{where}.workload",
                f"{fault.kind} needs an {kind.workload_kind} workload; '{fault.workload}' is "
                f"{spec.kind} ({kind.workload_kind} workloads: {', '.join(fitting) or 'none'})",
            )
    if fault.node is not None and fault.workload is not None and fault.workload in workloads:
        spec = next(w for w in s.fleet.workloads if w.name == fault.workload)
        if fault.node not in spec.node_names:
            yield f"{where}.node", f"node '{fault.node}' is not one of workload '{fault.workload}'s"


def _group_problems(
    s: Scenario, fault: FaultSpec, *, where: str, known: set[str]
) -> Iterator[tuple[str, str]]:
    """Group targets: one target at most, node-level kinds only, groups that exist."""
    given = [n for n in ("node", "nodes", "rack", "leaf") if getattr(fault, n) is not None]
    if len(given) > 1:
        yield f"{where}.{given[1]}", f"give one of node, nodes, rack, leaf (got {given})"
    if fault.group is None:
        return
    if FAULT_KINDS[fault.kind].target == "workload":
        yield f"{where}.{fault.group}", f"{fault.kind} targets a workload, not nodes"
    if fault.nodes is not None:
        for node in expand_nodes(fault.nodes):
            if node not in known:
                yield f"{where}.nodes", _unknown_node(node, s)
    for name, groups in (("rack", s.fleet.racks()), ("leaf", s.fleet.leaves())):
        value = getattr(fault, name)
        if value is not None and value not in groups:
            yield f"{where}.{name}", f"unknown {name} '{value}' ({name}s: {', '.join(groups)})"


def _trigger_problems(s: Scenario, known: set[str]) -> Iterator[tuple[str, str]]:
    if s.trigger.command is not None:
        for word in s.trigger.command.split():
            if word.startswith(NODE_PREFIX) and word not in known:
                yield "trigger.command", _unknown_node(word, s)
    if s.trigger.alert is not None:
        for label, value in s.trigger.alert.labels.items():
            if value.startswith(NODE_PREFIX) and value not in known:
                yield f"trigger.alert.labels.{label}", _unknown_node(value, s)
    if s.trigger.storm is not None:
        for node in expand_nodes(s.trigger.storm.nodes):
            if node not in known:
                yield "trigger.storm.nodes", _unknown_node(node, s)


def _unknown_node(node: str, s: Scenario) -> str:
    names = s.fleet.node_names
    width = node_name_width(s.fleet.nodes)
    return (
        f"unknown node '{node}' (fleet has {names[0]} .. {names[-1]}; indexes are "
        f"zero-padded to {width} digits)"
    )


def _out_of_range(what: str, index: int, *, count: int) -> str:
    return f"{what} index {index} out of range (the fleet has {count} per node: 0-{count - 1})"

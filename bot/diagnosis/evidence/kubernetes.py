"""`kubectl get node -o yaml` and `kubectl describe node`: allocatable vs capacity of
`nvidia.com/gpu`, node conditions, taints and cordon.

Allocatable below capacity means the device plugin marked GPUs unhealthy (DOMAIN §7): the
finding is `kubernetes` and says to look for the XID behind it. `Ready` not True is critical;
a pressure condition or NetworkUnavailable True is a warning; a cordon or taints are context
(info). Fragments count too: a `status:` (or bare `allocatable:`/`capacity:`) YAML block without
`kind: Node`, at any indentation, and a `Capacity:`/`Allocatable:` block without `Name:`.
Pure: no I/O (yaml only parses a string).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from bot.diagnosis.evidence.model import EvidenceFinding, Parsed, SourceText, Target
from bot.diagnosis.layers import Layer, Severity

GET_YAML, DESCRIBE = "kubectl get node -o yaml", "kubectl describe node"
DESCRIBE_POD = "kubectl describe pod"
GPU_RESOURCE = "nvidia.com/gpu"
_PROBLEM_WHEN_TRUE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
_DESCRIBE_NAME = re.compile(r"^Name:\s+(?P<name>\S+)")
_SECTION = re.compile(r"^(?P<section>[A-Z][A-Za-z ]*):\s*(?P<rest>.*)$")
_RESOURCE = re.compile(r"^\s+(?P<key>[\w./-]+):\s+(?P<value>\S+)\s*$")
_CONDITION = re.compile(r"^\s+(?P<type>[A-Z]\w+)\s+(?P<status>True|False|Unknown)\b")
_RESOURCE_KEYS = re.compile(r"^\s*(?:allocatable|capacity):\s*$", re.MULTILINE)


def parse_yaml(src: SourceText) -> Parsed | None:
    if "kind: Node" not in src.text and "kind: List" not in src.text:
        return _parse_fragment(src)
    try:
        documents = list(yaml.safe_load_all(src.text))
    except yaml.YAMLError:
        return None
    nodes = [n for doc in documents for n in _nodes(doc)]
    if not nodes:
        return None
    findings: list[EvidenceFinding] = []
    for node in nodes:
        findings += _judge_yaml(src, node)
    return Parsed(GET_YAML, tuple(findings))


def _parse_fragment(src: SourceText) -> Parsed | None:
    """A node's `status:` block (or its allocatable/capacity maps) pasted on its own."""
    if "allocatable:" not in src.text and "capacity:" not in src.text:
        return None
    if not _RESOURCE_KEYS.search(src.text):
        return None
    try:
        doc = yaml.safe_load(textwrap.dedent(src.text))
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    status = doc.get("status", doc)
    if not isinstance(status, dict) or not {"allocatable", "capacity"} & set(status):
        return None
    return Parsed(GET_YAML, tuple(_judge_yaml(src, {"status": status})))


def _nodes(doc: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(doc, dict):
        return
    if doc.get("kind") == "Node":
        yield doc
    for item in doc.get("items") or []:
        if isinstance(item, dict) and item.get("kind", "Node") == "Node" and "status" in item:
            yield item


def _line(src: SourceText, pattern: str, after: int = 0) -> int:
    regex = re.compile(pattern)
    for i in range(after, len(src.lines)):
        if regex.search(src.lines[i]):
            return i
    return max(after, 0)


def _judge_yaml(src: SourceText, node: Mapping[str, Any]) -> list[EvidenceFinding]:
    name = str((node.get("metadata") or {}).get("name") or "") or None
    status, spec = node.get("status") or {}, node.get("spec") or {}
    start = _line(src, rf"^\s*name: {re.escape(name)}\s*$") if name else 0
    target = Target(node=name)
    found: list[EvidenceFinding] = []
    capacity = (status.get("capacity") or {}).get(GPU_RESOURCE)
    allocatable = (status.get("allocatable") or {}).get(GPU_RESOURCE)
    if capacity is not None and allocatable is not None and int(allocatable) < int(capacity):
        heads = [
            _line(src, r"^\s*allocatable:\s*$", start),
            _line(src, r"^\s*capacity:\s*$", start),
        ]
        heads += [_line(src, r"nvidia\.com/gpu", i) for i in heads]
        found.append(_unhealthy(GET_YAML, src, target, int(allocatable), int(capacity), heads))
    for condition in status.get("conditions") or []:
        kind, state = str(condition.get("type")), str(condition.get("status"))
        at = _line(src, rf"type: {re.escape(kind)}\s*$", start)
        finding = _condition(GET_YAML, src, target, kind, state, at)
        if finding:
            found.append(finding)
    if spec.get("unschedulable"):
        at = _line(src, r"^\s*unschedulable: true", start)
        found.append(_cordoned(GET_YAML, src, target, at))
    for taint in spec.get("taints") or []:
        text = f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"
        at = _line(src, rf"key: {re.escape(str(taint.get('key')))}", start)
        found.append(_taint(GET_YAML, src, target, text, at))
    return found


def parse_describe(src: SourceText) -> Parsed | None:
    text = src.text
    if "Conditions:" not in text and ("Capacity:" not in text or "Allocatable:" not in text):
        return None
    name_line = next((i for i, ln in enumerate(src.lines) if _DESCRIBE_NAME.match(ln)), None)
    whole = name_line is not None and any(ln.startswith("Conditions:") for ln in src.lines)
    blocks = {ln.strip() for ln in src.lines} >= {"Capacity:", "Allocatable:"}
    if not whole and not blocks:
        return None
    name = _DESCRIBE_NAME.match(src.lines[name_line]) if name_line is not None else None
    target = Target(node=name["name"] if name else None)
    found: list[EvidenceFinding] = []
    section = ""
    resources: dict[str, dict[str, tuple[str, int]]] = {"Capacity": {}, "Allocatable": {}}
    for i, line in enumerate(src.lines):
        head = _SECTION.match(line)
        if head:
            section = head["section"]
            rest = head["rest"].strip()
            if section == "Taints" and rest and rest != "<none>":
                found.append(_taint(DESCRIBE, src, target, rest, i))
            if section == "Unschedulable" and rest == "true":
                found.append(_cordoned(DESCRIBE, src, target, i))
            continue
        if section in resources and (row := _RESOURCE.match(line)):
            resources[section][row["key"]] = (row["value"], i)
        elif section == "Conditions" and (cond := _CONDITION.match(line)):
            finding = _condition(DESCRIBE, src, target, cond["type"], cond["status"], i)
            if finding:
                found.append(finding)
        elif section == "Taints" and line.startswith(" ") and line.strip():
            found.append(_taint(DESCRIBE, src, target, line.strip(), i))
    cap, alloc = resources["Capacity"].get(GPU_RESOURCE), resources["Allocatable"].get(GPU_RESOURCE)
    if cap and alloc and cap[0].isdigit() and alloc[0].isdigit() and int(alloc[0]) < int(cap[0]):
        at = [cap[1], alloc[1]]
        found.append(_unhealthy(DESCRIBE, src, target, int(alloc[0]), int(cap[0]), at))
    return Parsed(DESCRIBE, tuple(found))


_POD_PENDING = re.compile(r"^Status:\s+Pending\s*$")
_POD_UNPLACED = re.compile(r"^Node:\s+<none>\s*$")


def parse_describe_pod(src: SourceText) -> Parsed | None:
    """`kubectl describe pod` of a pod the scheduler has not placed (Pending, Node <none>)."""
    if "<none>" not in src.text or "Pending" not in src.text:
        return None
    pending = next((i for i, ln in enumerate(src.lines) if _POD_PENDING.match(ln)), None)
    unplaced = next((i for i, ln in enumerate(src.lines) if _POD_UNPLACED.match(ln)), None)
    if pending is None or unplaced is None:
        return None
    summary = ("pod Pending and not placed on any node: the scheduler cannot place it "
               "(resources, gang or quota)")
    lines = tuple(src.cite(i) for i in sorted({unplaced, pending}))
    finding = EvidenceFinding(DESCRIBE_POD, "k8s.pod_unscheduled", Layer.KUBERNETES,
                              Severity.WARNING, summary, Target(), lines)
    return Parsed(DESCRIBE_POD, (finding,))


def _unhealthy(
    tool: str, src: SourceText, target: Target, allocatable: int, capacity: int, at: list[int]
) -> EvidenceFinding:
    missing = capacity - allocatable
    summary = (f"{GPU_RESOURCE} allocatable {allocatable} of capacity {capacity}: the device "
               f"plugin marked {missing} GPU(s) unhealthy; find the XID behind it")
    lines = tuple(src.cite(i) for i in sorted(set(at)))
    return EvidenceFinding(tool, "k8s.gpu_unallocatable", Layer.KUBERNETES, Severity.WARNING,
                           summary, target, lines)


def _condition(
    tool: str, src: SourceText, target: Target, kind: str, status: str, at: int
) -> EvidenceFinding | None:
    if kind == "Ready" and status != "True":
        return EvidenceFinding(tool, "k8s.not_ready", Layer.KUBERNETES, Severity.CRITICAL,
                               f"node condition Ready={status}", target, (src.cite(at),))
    if kind in _PROBLEM_WHEN_TRUE and status == "True":
        return EvidenceFinding(tool, f"k8s.{kind}", Layer.KUBERNETES, Severity.WARNING,
                               f"node condition {kind}=True", target, (src.cite(at),))
    return None


def _cordoned(tool: str, src: SourceText, target: Target, at: int) -> EvidenceFinding:
    return EvidenceFinding(tool, "k8s.cordoned", Layer.KUBERNETES, Severity.INFO,
                           "node is cordoned (unschedulable)", target, (src.cite(at),))


def _taint(tool: str, src: SourceText, target: Target, text: str, at: int) -> EvidenceFinding:
    return EvidenceFinding(tool, "k8s.taint", Layer.KUBERNETES, Severity.INFO,
                           f"taint {text}", target, (src.cite(at),))

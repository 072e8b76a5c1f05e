"""InfiniBand tools: `ibstat` and `ibstatus` (state, physical state and rate per CA port),
`perfquery` (one port's counters, `Name:.....value`) and `ibqueryerrors` (`[Counter == N]` per
port of the fabric).

Port judgements (DOMAIN §3, §8): a port that is not Active/LinkUp while other ports of the same
link layer are up is a down link (critical); `Disabled` is an administratively unused port
(info); a port slower than the node's fastest port of the same layer is degraded (warning).
Counters: SymbolErrorCounter, LinkErrorRecoveryCounter, PortRcvErrors, LocalLinkIntegrityErrors,
PortRcvRemotePhysicalErrors and ExcessiveBufferOverrunErrors are link-quality warnings;
LinkDownedCounter above 10 is a flapping link (critical; the soperator rule of thumb in DOMAIN
§3); PortXmitDiscards is info and PortXmitWait is congestion, ignored. Counters run since their
last reset, so one read shows history, not a rate. Fragments count: `Port N:` blocks without
their `CA '...'` line, `ibv_devinfo` (`hca_id:`, `port:`, `state: PORT_DOWN (1)`), and
`ibqueryerrors` summed as `port ALL:`. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.diagnosis.evidence.model import (
    EvidenceFinding,
    EvidenceLine,
    Parsed,
    SourceText,
    Target,
)
from bot.diagnosis.layers import Layer, Severity

IBSTAT, PERFQUERY, IBQUERYERRORS = "ibstat", "perfquery", "ibqueryerrors"

_CA = re.compile(r"^CA '(?P<hca>[^']+)'")
_PORT = re.compile(r"^\s*Port (?P<port>\d+):\s*$")
_DEVINFO_HCA = re.compile(r"^hca_id:\s*(?P<hca>\S+)")
_DEVINFO_PORT = re.compile(r"^\s+port:\s*(?P<port>\d+)\s*$")
_KV = re.compile(r"^\s+(?P<key>[A-Za-z][\w ]*?):\s*(?P<value>.*?)\s*$")
_IBSTATUS = re.compile(r"^Infiniband device '(?P<hca>[^']+)' port (?P<port>\d+) status:")
_PERF_HEADER = re.compile(r"^# Port (?:extended )?counters: Lid (?P<lid>\d+) port (?P<port>\d+)")
_PERF_ROW = re.compile(r"^(?P<key>[A-Za-z]\w+):\.+(?P<value>\d+)\s*$")
_QE_HEADER = re.compile(r'^\s*Errors for (?:0x[0-9a-fA-F]+ )?"(?P<desc>[^"]*)"')
_QE_PORT = re.compile(r"^\s*GUID (?P<guid>0x[0-9a-fA-F]+) port (?P<port>\d+|ALL):(?P<rest>.*)$")
_QE_COUNTER = re.compile(r"\[(?P<key>\w+) == (?P<value>\d+)")

_LINK_WARNINGS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "PortRcvErrors",
    "LocalLinkIntegrityErrors",
    "PortRcvRemotePhysicalErrors",
    "ExcessiveBufferOverrunErrors",
)
FLAP_THRESHOLD = 10
_ANY_PORT = re.compile(r"^\s*(?:Port \d+:|port:\s*\d+)\s*$|^Infiniband device '", re.MULTILINE)


@dataclass
class _Port:
    hca: str
    port: str
    line: int
    state: str = ""
    physical: str = ""
    rate: float | None = None
    layer: str = ""
    state_line: int = -1


def parse_ports(src: SourceText) -> Parsed | None:
    """`ibstat` or `ibstatus` output."""
    markers = ("Port ", "port:", "Infiniband device")
    if not any(m in src.text for m in markers) or not _ANY_PORT.search(src.text):
        return None
    ports: list[_Port] = []
    hca = ""
    for i, line in enumerate(src.lines):
        ca, port, status = _CA.match(line), _PORT.match(line), _IBSTATUS.match(line)
        ca = ca or _DEVINFO_HCA.match(line)
        port = port or _DEVINFO_PORT.match(line)
        if ca:
            hca = ca["hca"]
        elif port:  # a `Port N:` block pasted without its CA line names no HCA
            ports.append(_Port(hca, port["port"], i))
        elif status:
            hca = ""
            ports.append(_Port(status["hca"], status["port"], i))
        elif ports and (kv := _KV.match(line)):
            _set(ports[-1], kv["key"].strip().lower(), kv["value"], i)
        elif line and not line[0].isspace():  # the ibstat block ended
            hca = ""
    ports = [p for p in ports if p.state]
    if not ports:
        return None
    return Parsed(IBSTAT, tuple(f for p in ports for f in _judge(src, p, ports)))


def _set(port: _Port, key: str, value: str, i: int) -> None:
    # ibstatus prints `state: 4: ACTIVE`, `phys state: 5: LinkUp`, `rate: 400 Gb/sec (4X NDR)`.
    value = re.sub(r"^\d+:\s*", "", value)
    value = re.sub(r"\s*\(\d+\)$", "", re.sub(r"^(?:PORT|LINK)_", "", value))  # ibv_devinfo
    if key == "state":
        port.state, port.state_line = value.title(), i
    elif key in ("physical state", "phys state", "phys_state"):
        port.physical = value
    elif key == "rate":
        number = re.match(r"[\d.]+", value)
        port.rate = float(number.group()) if number else None
    elif key in ("link layer", "link_layer"):
        port.layer = value


def _judge(src: SourceText, port: _Port, ports: list[_Port]) -> list[EvidenceFinding]:
    target = Target(hca=port.hca or None, port=port.port)
    peers = [p for p in ports if p is not port and p.layer == port.layer]
    up = [p for p in peers if _is_up(p)]
    lines = tuple(src.cite(i) for i in (port.line, port.state_line) if i >= 0)
    where = f"{port.hca} port {port.port}" if port.hca else f"port {port.port}"
    if port.physical.lower() == "disabled":
        return [EvidenceFinding(IBSTAT, "ib.port_disabled", Layer.FABRIC, Severity.INFO,
                                f"{where} is disabled (unused port)", target, lines)]
    if not _is_up(port):
        severity = Severity.CRITICAL if up else Severity.WARNING
        also = f" while {len(up)} other {port.layer or 'IB'} port(s) are up" if up else ""
        summary = f"{where}: state {port.state}, physical state {port.physical}{also}"
        return [EvidenceFinding(IBSTAT, "ib.port_down", Layer.FABRIC, severity, summary,
                                target, lines)]
    fastest = max((p.rate for p in up if p.rate), default=None)
    if port.rate and fastest and port.rate < fastest:
        summary = f"{where} at {port.rate:g} Gb/s, other ports at {fastest:g} Gb/s"
        return [EvidenceFinding(IBSTAT, "ib.port_rate_degraded", Layer.FABRIC,
                                Severity.WARNING, summary, target, lines)]
    return []


def _is_up(port: _Port) -> bool:
    physical = port.physical.lower().replace("_", "")
    return port.state.lower() == "active" and (not physical or physical.startswith("linkup"))


def parse_perfquery(src: SourceText) -> Parsed | None:
    if " counters: Lid " not in src.text:  # rows count only under a header
        return None
    findings: list[EvidenceFinding] = []
    seen = False
    target, header = Target(), -1
    for i, line in enumerate(src.lines):
        head = _PERF_HEADER.match(line)
        if head:
            seen, header = True, i
            target = Target(hca=f"lid {head['lid']}", port=head["port"])
            continue
        row = _PERF_ROW.match(line)
        if row and header >= 0:
            seen = True
            finding = _counter(PERFQUERY, row["key"], int(row["value"]), target,
                               (src.cite(header), src.cite(i)))
            if finding:
                findings.append(finding)
    return Parsed(PERFQUERY, tuple(findings)) if seen else None


def parse_ibqueryerrors(src: SourceText) -> Parsed | None:
    if "Errors for " not in src.text and "GUID " not in src.text:
        return None
    findings: list[EvidenceFinding] = []
    seen = False
    desc, header = "", -1
    for i, line in enumerate(src.lines):
        head = _QE_HEADER.match(line)
        if head:
            seen, desc, header = True, head["desc"], i
            continue
        port = _QE_PORT.match(line)
        if port is None:
            continue
        seen = True
        node, _, hca = desc.partition(" ")
        target = Target(node=node or None, hca=hca or port["guid"], port=port["port"])
        cited = tuple(src.cite(j) for j in (header, i) if j >= 0)
        for counter in _QE_COUNTER.finditer(port["rest"]):
            finding = _counter(IBQUERYERRORS, counter["key"], int(counter["value"]), target, cited)
            if finding:
                findings.append(finding)
    return Parsed(IBQUERYERRORS, tuple(findings)) if seen else None


def _counter(
    tool: str, key: str, value: int, target: Target, cited: tuple[EvidenceLine, ...]
) -> EvidenceFinding | None:
    if value <= 0:
        return None
    if key == "LinkDownedCounter":
        severity = Severity.CRITICAL if value > FLAP_THRESHOLD else Severity.WARNING
        summary = f"LinkDownedCounter {value}: the link went down {value} time(s)" + (
            " (a flapping link)" if value > FLAP_THRESHOLD else ""
        )
        return EvidenceFinding(tool, "ib.link_downed", Layer.FABRIC, severity, summary,
                               target, cited)
    if key in _LINK_WARNINGS:
        return EvidenceFinding(tool, f"ib.{key}", Layer.FABRIC, Severity.WARNING,
                               f"{key} {value}: link-quality errors (cable/transceiver)",
                               target, cited)
    if key == "PortXmitDiscards":
        return EvidenceFinding(tool, "ib.xmit_discards", Layer.FABRIC, Severity.INFO,
                               f"PortXmitDiscards {value} (port down or congestion)", target, cited)
    return None

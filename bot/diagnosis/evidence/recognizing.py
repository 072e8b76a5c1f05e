"""Recognise which tool outputs and logs a text holds (a bundle may hold many), run their
parsers, and give one verdict for everything: the lowest layer with strong evidence, by the same
rule as bot.diagnosis.localizing (which this reuses). Pure: no I/O.

A bundle is taken to be about one node: GPUs named by PCI bus id in a kernel log are given
their index and UUID from `nvidia-smi -q` or NVRM's `GPU at PCI:…` lines in the same bundle.
Text in which nothing is recognised is read for mentions of known fault terms (prose); a verdict
resting only on mentions is low-confidence and says so. The report tells "recognised N outputs,
all healthy" from "recognised nothing", and lists the lines no parser understood.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.diagnosis.evidence import (
    dcgmi,
    dcgmi_nvlink,
    driver_versions,
    exposition,
    infiniband,
    kubernetes,
    loglines,
    mentions,
    nvidia_smi,
    nvlink,
    smi_table,
    vllm,
)
from bot.diagnosis.evidence.model import (
    EvidenceFinding,
    EvidenceLine,
    Parsed,
    SourceText,
    Target,
)
from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import SEVERITY_WEIGHT, Layer, Severity
from bot.diagnosis.localizing import localize
from bot.diagnosis.logs import LogCatalog

Parser = Callable[[SourceText], Parsed | None]
PARSERS: tuple[Parser, ...] = (
    nvidia_smi.parse,
    smi_table.parse,
    nvlink.parse,
    dcgmi.parse,
    infiniband.parse_ports,
    infiniband.parse_perfquery,
    infiniband.parse_ibqueryerrors,
    kubernetes.parse_yaml,
    kubernetes.parse_describe,
    kubernetes.parse_describe_pod,
    vllm.parse,
    dcgmi_nvlink.parse,
    driver_versions.parse,
)
#: the most a verdict resting only on prose mentions may claim
MENTION_CONFIDENCE = 0.3
MAX_NOT_UNDERSTOOD = 20
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_HOST = re.compile(r"^(?:uname(?: -a)?: )?Linux (?P<host>[\w.-]+) \d+\.\d+\.\d+", re.MULTILINE)


@dataclass(frozen=True)
class EvidenceReport:
    """Every finding, the formats recognised per source, and the verdict."""

    layer: Layer
    confidence: float
    culprits: tuple[str, ...]
    deciding: tuple[EvidenceFinding, ...]
    findings: tuple[EvidenceFinding, ...]
    formats: tuple[tuple[str, str], ...]  # (source, format)
    ranked: tuple[tuple[Layer, float], ...]
    summary: str
    not_understood: tuple[EvidenceLine, ...] = ()
    """Non-blank lines of log-like text that no parser or signature read (up to 20)."""

    @property
    def recognized(self) -> bool:
        return bool(self.formats)

    @property
    def status(self) -> str:
        """`fault`, `mention` (a verdict from prose only), `healthy` (outputs recognised, no
        fault in them) or `unrecognised` (nothing in the text was understood)."""
        if self.layer is not Layer.NONE:
            return "mention" if all(f.tool == mentions.FORMAT for f in self.deciding) else "fault"
        tools = {fmt for _, fmt in self.formats} - {mentions.FORMAT}
        return "healthy" if tools else "unrecognised"

    def to_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer.value,
            "status": self.status,
            "confidence": round(self.confidence, 3),
            "culprits": list(self.culprits),
            "summary": self.summary,
            "deciding": [f.to_dict() for f in self.deciding],
            "findings": [f.to_dict() for f in self.findings],
            "formats": [{"source": s, "format": f} for s, f in self.formats],
            "ranked": [[layer.value, round(score, 3)] for layer, score in self.ranked],
            "formats_recognised": sorted({f for _, f in self.formats}),
            "not_understood": [line.to_dict() for line in self.not_understood],
        }


def recognize(texts: Sequence[tuple[str, str]], *, catalog: LogCatalog) -> EvidenceReport:
    """Parse every (source name, text) and judge all findings together."""
    parsed: list[tuple[str, Parsed]] = []
    hosts: set[str] = set()
    unread: list[EvidenceLine] = []
    for source, text in texts:
        src = SourceText(_unquoted(text), source=source)
        found = _parse_one(src, catalog)
        if not found and (said := mentions.parse(src, catalog=catalog)):
            found = [said]
        parsed += [(source, p) for p in found]
        unread += _not_understood(src, found)
        if "Linux " in text:
            hosts.update(m["host"] for m in _HOST.finditer(text))
    inventory = [t for _, p in parsed for t in p.inventory]
    findings = [f for _, p in parsed for f in p.findings]
    hosts.update(f.target.node for f in findings if f.target.node)
    node = hosts.pop() if len(hosts) == 1 else None
    findings = [_enrich(f, inventory, node) for f in findings]
    formats = tuple(dict.fromkeys((source, p.format) for source, p in parsed))
    report = judge(findings, formats=formats)
    return replace(report, not_understood=tuple(unread[:MAX_NOT_UNDERSTOOD]))


def _unquoted(text: str) -> str:
    """Text quoted as a whole (`> ` from mail, Markdown or a chat reply) without its quote
    marks; line numbers stay the same."""
    if ">" not in text:
        return text
    lines = text.splitlines()
    body = [line for line in itertools.islice(lines, 400) if line.strip()]  # a sample decides
    quoted = sum(1 for line in body if _QUOTE.match(line))
    if not body or quoted * 5 < len(body) * 3:
        return text
    return "\n".join(_QUOTE.sub("", line, count=1) for line in lines)


def _parse_one(src: SourceText, catalog: LogCatalog) -> list[Parsed]:
    found = [p for parser in PARSERS if (p := parser(src)) is not None]
    if (metrics := exposition.parse(src, catalog=catalog)) is not None:
        found.append(metrics)
    return found + loglines.parse(src, catalog=catalog)


def _not_understood(src: SourceText, found: list[Parsed]) -> list[EvidenceLine]:
    """Lines of a text read only as logs (or not at all) that no signature matched. A tool
    output is read as a whole table, so its text is not listed line by line."""
    log_formats = set(loglines.FORMATS.values())
    if any(p.format not in log_formats and p.format != mentions.FORMAT for p in found):
        return []
    cited = {line.line_no for p in found for f in p.findings for line in f.lines}
    unread = (i for i, line in enumerate(src.lines) if line.strip() and i + 1 not in cited)
    return [src.cite(i) for i in itertools.islice(unread, MAX_NOT_UNDERSTOOD)]


def _enrich(finding: EvidenceFinding, inventory: list[Target], node: str | None) -> EvidenceFinding:
    target = finding.target
    for gpu in inventory:
        same = (
            (target.pci and target.pci == gpu.pci)
            or (target.uuid and target.uuid == gpu.uuid)
            or (target.gpu_index is not None and target.gpu_index == gpu.gpu_index
                and not target.pci and not target.uuid)
        )
        if same:
            target = target.merged(gpu)
    if node and target.node is None:
        target = replace(target, node=node)
    return finding if target == finding.target else replace(finding, target=target)


def judge(
    findings: Sequence[EvidenceFinding], *, formats: tuple[tuple[str, str], ...] = ()
) -> EvidenceReport:
    """The verdict over findings: localize()'s layer rule, context findings never deciding."""
    # Info findings are context (a power cap at full load, an idle PCIe link): listed, and a
    # fault only where a warning or a critical one stands beside them.
    # Context findings decide only when nothing else does (a pasted `caused by previous Xid
    # 149` line whose Xid 149 scrolled away is still Xid 149's fault), as in logs.classify_text.
    strong = [f for f in findings if f.layer is not Layer.NONE and f.severity is not Severity.INFO]
    deciding_pool = [f for f in strong if not f.context] or strong
    outcomes = [
        CheckOutcome(
            check_id=f.code,
            layer=f.layer,
            status=CheckStatus.FIRED,
            finding=Finding(f.code, f.layer, f.severity, f.summary, Culprit(node=f.target.node)),
        )
        for f in deciding_pool
    ]
    verdict = localize(outcomes)
    ordered = sorted(findings, key=lambda f: (f.context, -SEVERITY_WEIGHT[f.severity]))
    if verdict.layer is Layer.NONE:
        names = ", ".join(sorted({fmt for _, fmt in formats}))
        summary = (f"recognised {len(formats)} output(s), all healthy ({names})" if formats
                   else "recognised nothing: no known tool output, log signature or fault term")
        return EvidenceReport(Layer.NONE, verdict.confidence, (), (), tuple(ordered), formats,
                              (), summary)
    in_layer = [f for f in ordered if f.layer is verdict.layer and f in deciding_pool]
    causes = [f for f in in_layer if f.severity is not Severity.INFO] or in_layer
    culprits = tuple(dict.fromkeys(d for f in causes if (d := f.target.describe())))
    where = ", ".join(culprits[:4]) or "no specific culprit"
    summary = f"{verdict.layer.value} fault at {where}: {causes[0].summary}"
    confidence = verdict.confidence
    if all(f.tool == mentions.FORMAT for f in causes):
        summary = f"from a mention, not from tool output (low confidence): {summary}"
        confidence = min(confidence, MENTION_CONFIDENCE)
    return EvidenceReport(
        layer=verdict.layer,
        confidence=confidence,
        culprits=culprits,
        deciding=tuple(causes),
        findings=tuple(ordered),
        formats=formats,
        ranked=verdict.ranked,
        summary=summary,
    )

"""Known fault terms in prose: a colleague's summary pasted instead of tool output ("XIDs 119
and 120 on 3 nodes after the driver upgrade", "the rack hit its power brake", "the node came up
short a GPU").

Used only when nothing else in the text was recognised. Every finding is tool `mention`: the
verdict built on it is low-confidence and says it comes from a mention, not from tool output
(bot.diagnosis.evidence.recognizing). Terms and their layers follow DOMAIN.md (§2 XIDs, §8
symptom table). A node or GPU named in the same clause as the term ("gpu-node-07 fell off the
bus", "GPU 3 on dgx-12") becomes the finding's target (bot.diagnosis.evidence.subjects); when
the clause names none, the one node the whole text names, if it names exactly one.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from bot.diagnosis.evidence.model import EvidenceFinding, EvidenceLine, Parsed, SourceText, Target
from bot.diagnosis.evidence.subjects import clause_around, named_nodes, subjects
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.logs import LogCatalog, xid_info

FORMAT = "mention"
_XIDS = re.compile(
    r"\bXIDs?\b[\s:#]*(?:errors?\s*)?(?P<codes>\d{1,3}(?:\s*(?:,|/|&|\band\b|\bor\b)\s*\d{1,3})*)\b",
    re.IGNORECASE,
)
_DRIVER_CHANGE = re.compile(
    r"\bdriver\b[^.]{0,60}?\b(?:upgrade|update|rollout|rolled out|roll(?:ed|ing)? back|release|"
    r"version)|\b(?:upgrade|update|rollout|roll(?:ed|ing)? back|rolling back)\b[^.]{0,40}?\bdriver"
    r"|\b(?:rolling|rolled|roll) back to \d+\.\d+",
    re.IGNORECASE,
)
#: (pattern, layer, meaning) for terms whose layer does not depend on an XID table row
_TERMS: tuple[tuple[re.Pattern[str], Layer, str], ...] = (
    (re.compile(r"\b(?:fallen|fell|falls|falling) off (?:the|of the) (?:PCIe? )?bus\b",
                re.IGNORECASE), Layer.GPU_HARDWARE,
     "a GPU fell off the bus (the Xid 79 condition)"),
    (re.compile(r"\b(?:came up|is|was|are|were|comes up) short (?:a|one|\d+) GPUs?\b"
                r"|\blost (?:a|one|\d+) GPUs?\b|\bGPUs? (?:is |are |was |were )?missing\b"
                r"|\bmissing (?:a |one )?GPUs?\b|\bGPUs? (?:is |was )?(?:lost|loss)\b"
                r"|\bGPUs?\b[^.\n]{0,30}?\bnot working\b", re.IGNORECASE),
     Layer.GPU_HARDWARE, "a GPU is missing from the node"),
    (re.compile(r"\bhardware (?:error|failure|fault)\b|\bhardware is (?:likely )?broken\b",
                re.IGNORECASE), Layer.GPU_HARDWARE, "a hardware error on the GPU"),
    (re.compile(r"\b(?:pods?|workers?|replicas?)\b[^.\n]{0,80}?\bpending\b", re.IGNORECASE),
     Layer.KUBERNETES, "pods stay Pending (scheduling, gang placement or quota)"),
    (re.compile(r"\bdrain(?:ed)?\b[^.\n]{0,60}?\bNHC\b|\bNHC\b[^.\n]{0,60}?\bdrain",
                re.IGNORECASE), Layer.NODE_SOFTWARE, "the node health check drained the node"),
    (re.compile(r"\bpower[- ]brake\b", re.IGNORECASE), Layer.FACILITY,
     "a power brake was asserted (facility power)"),
    (re.compile(r"\bpower (?:outage|issue|event|failure|cut|loss|problem)s?\b|\blost power\b"
                r"|\b(?:PDU|UPS)\b", re.IGNORECASE), Layer.FACILITY,
     "a site power event (facility)"),
    (re.compile(r"\b(?:HW|hardware) thermal slowdown\b|\bthermal (?:slowdown|throttling)\b",
                re.IGNORECASE), Layer.FACILITY, "GPUs slowed by temperature (cooling)"),
    (re.compile(r"\b(?:link|port|connection|cable|InfiniBand|IB|HCA)\b[^.\n]{0,40}?\bflapping\b"
                r"|\bflapping (?:IB |InfiniBand |network )?(?:link|port|connection)\b",
                re.IGNORECASE), Layer.FABRIC,
     "a network link is flapping"),
    (re.compile(r"\bmark(?:s|ed|ing)? (?:the |any |a |all )?(?:GPU|device)s? (?:as )?unhealthy\b"
                r"|\bdevice(?:s)? marked unhealthy\b", re.IGNORECASE), Layer.KUBERNETES,
     "the device plugin marks GPUs unhealthy (allocatable drops until the plugin restarts)"),
    (re.compile(r"\bGSP\b[^.\n]{0,30}?\btime ?outs?\b", re.IGNORECASE), Layer.NODE_SOFTWARE,
     "GSP firmware timeouts (driver/GSP, the Xid 119 class)"),
    (re.compile(r"\bfabric ?manager\b[^.\n]{0,30}?\b(?:down|crash\w*|stopped|not running|dead)\b",
                re.IGNORECASE), Layer.NODE_SOFTWARE, "Fabric Manager is down"),
    (re.compile(r"\b(?:uncorrectable|double[- ]bit) ECC\b", re.IGNORECASE), Layer.GPU_HARDWARE,
     "uncorrectable ECC errors"),
    (re.compile(r"\bKV[- ]cache\b[^.\n]{0,30}?\b(?:full|exhausted|saturated|at 100 ?%)",
                re.IGNORECASE), Layer.WORKLOAD, "the inference engine ran out of KV cache"),
)


def parse(src: SourceText, *, catalog: LogCatalog) -> Parsed | None:
    """Mentions of known fault terms, or None when the text names none."""
    flat = " ".join(src.text.split())  # prose wraps anywhere: `Xid\n119`
    spans = [*_xid_mentions(flat, catalog), *_term_mentions(flat)]
    only = named_nodes(flat)
    fallback = Target(node=only[0]) if len(only) == 1 else Target()
    found = [
        _finding(src, flat[start:end], layer, severity, meaning, target)
        for start, end, layer, severity, meaning in spans
        for target in (subjects(clause_around(flat, start, end)) or [fallback])
    ]
    unique = {(f.layer, f.summary, f.target): f for f in reversed(found)}  # the first kept
    findings = tuple(reversed(unique.values()))
    return Parsed(FORMAT, findings) if findings else None


Span = tuple[int, int, Layer, Severity, str]
"""Where a term was said in the flattened text, its layer, severity and meaning."""


def _xid_mentions(flat: str, catalog: LogCatalog) -> Iterator[Span]:
    driver = _DRIVER_CHANGE.search(flat)
    for found in _XIDS.finditer(flat):
        for code in map(int, re.findall(r"\d+", found["codes"])):
            row = xid_info(code, catalog)
            if row.layer is None:
                continue
            layer, why = Layer(row.layer), f"Xid {code} ({row.mnemonic}): {row.meaning}"
            if driver and layer is Layer.WORKLOAD:  # DOMAIN §8: app XIDs after a driver change
                layer, why = Layer.NODE_SOFTWARE, f"Xid {code} tied to a driver change"
            severity = Severity.INFO if row.secondary else Severity.WARNING
            yield found.start(), found.end(), layer, severity, why


def _term_mentions(flat: str) -> Iterator[Span]:
    for pattern, layer, meaning in _TERMS:
        if found := pattern.search(flat):
            yield found.start(), found.end(), layer, Severity.WARNING, meaning


def _finding(
    src: SourceText, said: str, layer: Layer, severity: Severity, meaning: str, target: Target
) -> EvidenceFinding:
    words = said.split()
    at = next((i for i, line in enumerate(src.lines) if words and words[0] in line), None)
    lines = (src.cite(at),) if at is not None else (EvidenceLine(src.source, 0, said),)
    return EvidenceFinding(FORMAT, f"mention.{layer.value}", layer, severity,
                           f"mentioned, not measured: {meaning} (\"{said}\")", target, lines)

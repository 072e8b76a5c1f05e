"""`dcgmi diag -r 1|2|3|4` result tables: one `| Test | Result |` row per test, grouped under
`|-----  Deployment  ---` style category rows, with `Warning` / `Error` / `Info` rows carrying
the text of the test above them.

A `Fail` in the hardware, integration or stress tests is `gpu_hardware` (NVLink failures are
`fabric`, thermal/power violations `facility`); a `Fail` in the deployment checks is the node's
software (driver, libraries, persistence mode), except page retirement / row remap, which is the
GPU's memory. `Warn` is a warning. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.diagnosis.evidence.model import EvidenceFinding, Parsed, SourceText, Target
from bot.diagnosis.layers import Layer, Severity

FORMAT = "dcgmi diag"
_ROW = re.compile(r"^\|\s*(?P<name>[^|]*?)\s*\|\s*(?P<value>[^|]*?)\s*\|\s*$")
_CATEGORY = re.compile(r"^[|+]-+\s+(?P<category>[A-Za-z][\w ]*?)\s+-+\+")
_RESULT = re.compile(r"^(?P<result>Pass|Fail|Warn|Skip)\b(?:\s*-\s*(?P<which>.*))?", re.IGNORECASE)
_GPUS = re.compile(r"GPUs?\s*:?\s*(?P<ids>\d+(?:\s*,\s*\d+)*)|GPU\s?(?P<one>\d+)")
_NOTES = ("warning", "error", "info", "")


@dataclass
class _Test:
    category: str
    name: str
    result: str
    which: str
    line: int
    notes: list[tuple[str, int]] = field(default_factory=list)
    more: list[int] = field(default_factory=list)  # lines of wrapped notes


def parse(src: SourceText) -> Parsed | None:
    if "Diagnostic" not in src.text or not any(
        "Diagnostic" in line and "Result" in line for line in src.lines
    ):
        return None
    tests: list[_Test] = []
    category = ""
    for i, line in enumerate(src.lines):
        heading = _CATEGORY.match(line)
        if heading:
            category = heading["category"].strip()
            continue
        row = _ROW.match(line)
        if row is None:
            continue
        name, value = row["name"], row["value"]
        # Cells wrap mid-word at a fixed width: keep the cell's own spaces to rejoin them.
        cell = line.split("|")[2]
        cell = (cell[1:] if cell.startswith(" ") else cell).rstrip()
        result = _RESULT.match(value)
        if not name and result and tests:  # `Fail - GPU: 1` under `Pass - GPUs: 0, 2, 3`
            last = tests[-1]
            which = result["which"] or ""
            tests.append(_Test(last.category, last.name, result["result"].title(), which, i))
        elif not name and tests and tests[-1].notes:  # a wrapped note continues
            text, first = tests[-1].notes[-1]
            tests[-1].notes[-1] = (text + cell, first)
            tests[-1].more.append(i)
        elif name.lower() in _NOTES and tests:
            tests[-1].notes.append((cell, i))
        elif result and category.lower() != "metadata":
            which = result["which"] or ""
            tests.append(_Test(category, name, result["result"].title(), which, i))
    if not tests:
        return None
    findings = [f for t in tests if t.result in ("Fail", "Warn") for f in _findings(src, t)]
    return Parsed(FORMAT, tuple(findings))


def _findings(src: SourceText, test: _Test) -> list[EvidenceFinding]:
    text = " ".join(note for note, _ in test.notes)
    layer = _layer(test, text)
    severity = Severity.CRITICAL if test.result == "Fail" else Severity.WARNING
    at = sorted({test.line, *(i for _, i in test.notes), *test.more})
    lines = tuple(src.cite(i) for i in at)
    detail = f": {text[:240]}" if text else ""
    summary = f"dcgmi diag {test.category} / {test.name}: {test.result}{detail}"
    gpus = _gpu_ids(test.which) or _gpu_ids(text) or [None]
    return [
        EvidenceFinding(FORMAT, f"dcgmi.{test.result.lower()}", layer, severity, summary,
                        Target(gpu_index=gpu), lines)
        for gpu in gpus
    ]


def _layer(test: _Test, text: str) -> Layer:
    lowered = f"{test.name} {text}".lower()
    if "nvlink" in lowered:
        return Layer.FABRIC
    if "thermal violation" in lowered or "power violation" in lowered:
        return Layer.FACILITY
    if test.category.lower() == "deployment":
        retire = "retirement" in lowered or "remap" in lowered
        return Layer.GPU_HARDWARE if retire else Layer.NODE_SOFTWARE
    return Layer.GPU_HARDWARE


def _gpu_ids(text: str) -> list[str | None]:
    if text.strip().lower() == "all":
        return []
    found = _GPUS.search(text)
    if found is None:
        return []
    if found["ids"]:
        return [g.strip() for g in found["ids"].split(",")]
    return [found["one"]]

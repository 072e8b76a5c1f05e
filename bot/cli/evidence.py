"""`gpu-oncall classify-log` and `triage-bundle`: a verdict over pasted text or a bundle of tool
outputs. Loads the parsers and the log catalog only: no engine, LangGraph, storage or adapters."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bot.cli.terminal import Terminal
from bot.diagnosis.evidence import EvidenceReport
from bot.errors import UserInputError


def classify_log(term: Terminal, *, source: str, as_json: bool) -> int:
    """Classify any text with the log-signature catalog: layer, deciding signature, lines."""
    from bot.diagnosis.evidence.pasting import classify_paste
    from bot.diagnosis.logs import load_log_catalog
    from runbooks import LOG_SIGNATURES_FILE

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(errors="replace")
    except OSError as exc:
        raise UserInputError(f"cannot read log '{source}': {exc.strerror}") from exc
    catalog = load_log_catalog(LOG_SIGNATURES_FILE)
    verdict = classify_paste(
        text, catalog=catalog, source=Path(source).name if source != "-" else "stdin"
    )
    found, report, seen = verdict.classification, verdict.report, verdict.evidence
    matches = [
        {
            "line_no": m.line_no,
            "signature": m.signature,
            "layer": m.layer,
            "severity": m.severity,
            "xid": m.xid,
            "line": m.line,
        }
        for m in found.matches
    ]
    if as_json:
        result: dict[str, Any] = {
            "layer": verdict.layer,
            "signal": verdict.signal,
            "status": seen.status,
            "formats_recognised": sorted({fmt for _, fmt in seen.formats}),
            "not_understood": [line.to_dict() for line in seen.not_understood],
            "xids": list(found.xids),
            "matches": matches,
        }
        if report is not None:  # a tool output was recognised: its verdict decides
            result["evidence"] = report.to_dict()
        term.plain(json.dumps(result, indent=2))
        return 0
    if report is not None:
        _print_evidence(term, report)
        return 0
    term.plain(f"layer:  {found.layer or 'none (no known signature)'}")
    term.plain(f"signal: {found.signal or '-'}")
    term.plain(f"status: {seen.status}: {seen.summary}")
    if found.xids:
        term.plain(f"XIDs:   {', '.join(str(x) for x in found.xids)}")
    for m in found.matches:
        term.plain(f"  {m.line_no:>6}  {m.signature:<34} {m.line[:160]}")
    if seen.not_understood:
        term.plain(f"not understood ({len(seen.not_understood)} line(s) shown):")
    for line in seen.not_understood[:5]:
        term.plain(f"  {line.cite()}  {line.text.strip()[:140]}")
    return 0


def triage_bundle(term: Terminal, *, path: str, as_json: bool) -> int:
    """One verdict over a directory, tarball or file of tool outputs and logs."""
    from bot.diagnosis.evidence import recognize
    from bot.diagnosis.logs import load_log_catalog
    from bot.intake.bundles import read_bundle
    from runbooks import LOG_SIGNATURES_FILE

    bundle = read_bundle(Path(path))
    report = recognize(bundle.texts, catalog=load_log_catalog(LOG_SIGNATURES_FILE))
    if as_json:
        result = report.to_dict() | {
            "files": [name for name, _ in bundle.texts],
            "notes": bundle.notes,
        }
        term.plain(json.dumps(result, indent=2))
        return 0
    _print_evidence(term, report)
    term.plain(f"read:     {len(bundle.texts)} file(s)")
    for note in bundle.notes:
        term.plain(f"note:     {note}")
    return 0


def _print_evidence(term: Terminal, report: EvidenceReport) -> None:
    """Verdict, culprits, the deciding findings with file:line evidence, then the rest."""
    term.plain(f"verdict:  {report.layer.value} (confidence {report.confidence:.2f})")
    term.plain(f"culprits: {', '.join(report.culprits) or '-'}")
    term.plain(f"summary:  {report.summary}")
    if report.deciding:
        term.plain("deciding findings:")
    for finding in report.deciding[:10]:
        term.plain(f"  {finding.severity.value:<8} {finding.summary}")
        for line in finding.lines[:4]:
            term.plain(f"           {line.cite()}  {line.text.strip()[:140]}")
    others = [f for f in report.findings if f not in report.deciding]
    if others:
        term.plain("other findings:")
    for finding in others[:15]:
        where = finding.target.describe() or "-"
        cite = finding.lines[-1].cite() if finding.lines else ""
        extra = " (context)" if finding.context else ""
        term.plain(
            f"  {finding.severity.value:<8} {finding.layer.value:<13} {where}: "
            f"{finding.summary[:110]}{extra} [{cite}]"
        )
    formats = sorted({fmt for _, fmt in report.formats})
    term.plain(f"formats:  {', '.join(formats) or '-'}")
    term.plain(f"status:   {report.status}")

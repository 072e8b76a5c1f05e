"""Log evidence: classify a block of log text against the log-signature catalog
(runbooks/log_signatures.yaml) into matches and the layer they point at.

Pure: no I/O (the catalog is read by `load_log_catalog`, re-exported here). A keyword pre-filter
means only lines holding a signature's keyword meet its regex, so a 10 MB log stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from bot.diagnosis.layers import SEVERITY_WEIGHT, Layer, Severity, layer_rank
from bot.diagnosis.signatures import (
    UNKNOWN_XID_MEANING,
    LogCatalog,
    LogCatalogError,
    Outcome,
    Signature,
    XidInfo,
    load_log_catalog,
    parse_log_catalog,
    xid_info,
)

__all__ = [
    "MAX_LINE_CHARS",
    "UNKNOWN_XID_MEANING",
    "LogCatalog",
    "LogCatalogError",
    "LogClassification",
    "LogMatch",
    "XidInfo",
    "classify_text",
    "load_log_catalog",
    "parse_log_catalog",
    "xid_info",
]

#: Lines longer than this are matched on their first MAX_LINE_CHARS characters only.
MAX_LINE_CHARS = 16_384

_NONFATAL = re.compile(r"\bNon-?fatal\b", re.IGNORECASE)


@dataclass(frozen=True)
class LogMatch:
    """One log line recognised by one signature (a line may match several signatures)."""

    signature: str
    layer: str | None
    severity: str
    meaning: str
    line_no: int  # 1-based
    line: str
    fields: dict[str, str]
    xid: int | None = None
    secondary: bool = False
    caused_by: int | None = None  # `caused by previous Xid N`: the XID this one is attributed to


@dataclass(frozen=True)
class LogClassification:
    """Every match, and the layer with the strongest evidence (None when nothing decides)."""

    matches: tuple[LogMatch, ...]
    layer: str | None = None
    signal: str | None = None  # the signature that decided the layer
    xids: tuple[int, ...] = ()
    decided_by: LogMatch | None = None


# --- classifying -----------------------------------------------------------------------------


def classify_text(text: str, catalog: LogCatalog) -> LogClassification:
    """Match every line of `text` against the catalog and pick the deciding layer.

    The layer comes from the matches with a layer, primary before secondary (a `caused by
    previous Xid` line never outranks the primary XID): highest severity first, then the lowest
    layer bottom-up (DOMAIN §8), then the earliest line. A `caused by previous Xid N` line takes
    XID N's layer (the chain is the earlier XID's fault); a signature's `secondary_with_xids`
    makes it a consequence when one of those XIDs is in the text (NCCL `status=12` after Xid 79).
    """
    matches = _demote_consequences(tuple(_scan(text, catalog)), catalog)
    decisive = [m for m in matches if m.layer is not None]
    pool = [m for m in decisive if not m.secondary] or decisive
    best = min(pool, key=_strength, default=None)
    codes = {m.xid for m in matches} | {m.caused_by for m in matches}
    xids = tuple(sorted(code for code in codes if code is not None))
    if best is None:
        return LogClassification(matches=matches, xids=xids)
    return LogClassification(
        matches=matches, layer=best.layer, signal=best.signature, xids=xids, decided_by=best
    )


def _demote_consequences(
    matches: tuple[LogMatch, ...], catalog: LogCatalog
) -> tuple[LogMatch, ...]:
    present = {m.xid for m in matches if m.xid is not None and not m.secondary}
    rules = {s.name: s.secondary_with_xids for s in catalog.signatures if s.secondary_with_xids}
    return tuple(
        replace(m, secondary=True) if rules.get(m.signature, frozenset()) & present else m
        for m in matches
    )


def _strength(match: LogMatch) -> tuple[float, int, int]:
    """Sort key: strongest evidence first."""
    layer = Layer(match.layer) if match.layer else Layer.NONE
    return (-SEVERITY_WEIGHT[Severity(match.severity)], layer_rank(layer), match.line_no)


def _scan(text: str, catalog: LogCatalog) -> Iterator[LogMatch]:
    """Only lines holding a keyword meet the regexes, and only their keywords' signatures."""
    candidates = _candidate_lines(text, catalog.keyword_index)
    line_no, counted_to = 1, 0
    for start in sorted(candidates):
        line_no += text.count("\n", counted_to, start)
        counted_to = start
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start : min(end, start + MAX_LINE_CHARS)].rstrip("\r")
        for i in sorted(candidates[start]):
            sig = catalog.signatures[i]
            found = sig.pattern.search(line)
            if found is None:
                continue
            fields = {k: v for k, v in found.groupdict().items() if v is not None}
            if sig.context is not None and not set(sig.context.groupindex) <= set(fields):
                fields = _context_fields(sig.context, sig.context_lines, text, start) | fields
            yield _make_match(sig, fields, line, line_no, catalog)


def _candidate_lines(text: str, index: Mapping[str, tuple[int, ...]]) -> dict[int, set[int]]:
    """Line start offset -> signatures whose keywords the line holds. str.find per keyword is
    a C substring search, so a 10 MB log with few hits costs one pass per keyword."""
    candidates: dict[int, set[int]] = {}
    for keyword, signatures in index.items():
        at = text.find(keyword)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            candidates.setdefault(start, set()).update(signatures)
            end = text.find("\n", at + len(keyword))
            at = -1 if end < 0 else text.find(keyword, end + 1)
    return candidates


def _context_fields(context: re.Pattern[str], lines: int, text: str, start: int) -> dict[str, str]:
    """Fields from the nearest of the `lines` lines before `start` that match `context`."""
    end = start - 1
    for _ in range(lines):
        if end < 0:
            break
        begin = text.rfind("\n", 0, end) + 1
        found = context.search(text, begin, min(end, begin + MAX_LINE_CHARS))
        if found:
            return {k: v for k, v in found.groupdict().items() if v is not None}
        end = begin - 1
    return {}


def _make_match(
    sig: Signature, fields: dict[str, str], line: str, line_no: int, catalog: LogCatalog
) -> LogMatch:
    xid = int(fields["xid"]) if "xid" in fields else sig.xid
    caused_by = int(fields["caused_by"]) if fields.get("caused_by", "").isdigit() else None
    outcome = _outcome(sig, fields, catalog)
    if caused_by is not None and sig.layer_table:
        outcome = _attributed(xid, caused_by, catalog)
    secondary = outcome.secondary or any(name in fields for name in sig.secondary_when)
    return LogMatch(
        signature=sig.name,
        layer=outcome.layer,
        severity=outcome.severity,
        meaning=outcome.meaning,
        line_no=line_no,
        line=line,
        fields=fields,
        xid=xid,
        secondary=secondary,
        caused_by=caused_by,
    )


def _attributed(xid: int | None, caused_by: int, catalog: LogCatalog) -> Outcome:
    """`Xid 45 … caused by previous Xid 149` is Xid 149's fault: its layer and severity."""
    row = xid_info(caused_by, catalog)
    meaning = f"Xid {xid} caused by previous Xid {row.code} ({row.mnemonic}): {row.meaning}"
    return Outcome(row.layer, row.severity, meaning, secondary=True)


def _outcome(sig: Signature, fields: Mapping[str, str], catalog: LogCatalog) -> Outcome:
    value = fields.get(sig.layer_field) if sig.layer_field else None
    if value is None:
        return sig.default
    if value in sig.layer_values:
        return sig.layer_values[value]
    if sig.layer_table and value.isdigit():
        row = xid_info(int(value), catalog)
        meaning = f"Xid {row.code} ({row.mnemonic}): {row.meaning}"
        severity = row.severity
        if row.nonfatal_severity and _NONFATAL.search(fields.get("detail", "")):
            severity, meaning = row.nonfatal_severity, f"{meaning} (Nonfatal)"
        return Outcome(row.layer, severity, meaning, row.secondary)
    return sig.default

"""Log evidence: classify a block of log text against the log-signature catalog
(runbooks/log_signatures.yaml) into matches and the layer they point at.

Pure: no I/O (the catalog is read by `load_log_catalog`, re-exported here). A keyword pre-filter
means only lines holding a signature's keyword meet its regex, so a 10 MB log stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from bot.diagnosis.keyword_lines import keyword_lines
from bot.diagnosis.layers import SEVERITY_WEIGHT, Layer, Severity, layer_rank
from bot.diagnosis.literal_prefix import literal_prefix
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
    weight = _WEIGHTS.get(match.severity)
    rank = _RANKS.get(match.layer or Layer.NONE.value)
    if weight is None or rank is None:  # not a known severity or layer: as Severity/Layer say
        layer = Layer(match.layer) if match.layer else Layer.NONE
        weight, rank = SEVERITY_WEIGHT[Severity(match.severity)], layer_rank(layer)
    return (-weight, rank, match.line_no)


_WEIGHTS = {severity.value: SEVERITY_WEIGHT[severity] for severity in Severity}
_RANKS = {layer.value: layer_rank(layer) for layer in Layer}


def _scan(text: str, catalog: LogCatalog) -> Iterator[LogMatch]:
    """Only lines holding a keyword meet the regexes, and only their keywords' signatures. A
    search is shared by the lines that agree from the pattern's literal prefix on (an XID
    storm's lines differ only in their timestamps), and so is the outcome of equal fields."""
    found = keyword_lines(text, catalog.keyword_index)
    searches: dict[tuple[int, str], dict[str, str] | None] = {}
    outcomes: dict[tuple[int, tuple[tuple[str, str], ...]], _Judged] = {}
    for number in sorted(found.signatures):
        line = found.lines[number][:MAX_LINE_CHARS].rstrip("\r")
        for i in sorted(found.signatures[number]):
            sig = catalog.signatures[i]
            groups = _search(i, sig.pattern, line, searches)
            if groups is None:
                continue
            fields = dict(groups)
            if sig.context is not None and not set(sig.context.groupindex) <= set(fields):
                start = found.starts[number]
                fields = _context_fields(sig.context, sig.context_lines, text, start) | fields
            key = (i, tuple(fields.items()))
            judged = outcomes.get(key)
            if judged is None:
                judged = outcomes[key] = _judge(sig, fields, catalog)
            yield judged.match(fields, line, number + 1)


def _search(
    index: int,
    pattern: re.Pattern[str],
    line: str,
    searches: dict[tuple[int, str], dict[str, str] | None],
) -> dict[str, str] | None:
    """`pattern`'s groups on `line` (None: no match), searched once per distinct text from the
    pattern's literal prefix on (bot.diagnosis.literal_prefix)."""
    prefix = literal_prefix(pattern)
    if prefix:
        at = line.find(prefix)
        if at < 0:
            return None
        line = line[at:]
    key = (index, line)
    if key in searches:
        return searches[key]
    found = pattern.search(line)
    groups = found.groupdict() if found is not None else None
    fields = None if groups is None else {k: v for k, v in groups.items() if v is not None}
    searches[key] = fields
    return fields


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


@dataclass(frozen=True)
class _Judged:
    """What a signature's fields mean, before the line they were found on is known."""

    signature: str
    outcome: Outcome
    xid: int | None
    secondary: bool
    caused_by: int | None

    def match(self, fields: dict[str, str], line: str, line_no: int) -> LogMatch:
        return LogMatch(
            signature=self.signature,
            layer=self.outcome.layer,
            severity=self.outcome.severity,
            meaning=self.outcome.meaning,
            line_no=line_no,
            line=line,
            fields=fields,
            xid=self.xid,
            secondary=self.secondary,
            caused_by=self.caused_by,
        )


def _judge(sig: Signature, fields: dict[str, str], catalog: LogCatalog) -> _Judged:
    xid = int(fields["xid"]) if "xid" in fields else sig.xid
    caused_by = int(fields["caused_by"]) if fields.get("caused_by", "").isdigit() else None
    outcome = _outcome(sig, fields, catalog)
    if caused_by is not None and sig.layer_table:
        outcome = _attributed(xid, caused_by, catalog)
    secondary = outcome.secondary or any(name in fields for name in sig.secondary_when)
    return _Judged(sig.name, outcome, xid, secondary, caused_by)


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

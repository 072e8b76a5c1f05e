"""The kernel-log scan made cheaper gives exactly what the scan it replaced gave.

Covers: on generated log text (verbatim public lines from the classifier's corpus and the
catalog's examples, timestamped, repeated as storms with other numbers, mixed with noise, CRLF
endings and lines past MAX_LINE_CHARS), `classify_text` equals the reference built on the old
scan (kept below as it was), match for match: signature, layer, severity, meaning, line number,
line, fields, XID, secondary, caused-by, and the deciding match; the same on a generated
catalog whose keywords hold digits, a `0` and newlines; a regex's literal prefix is one every
match starts with, so searching from its first occurrence gives the same groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bot.diagnosis import logs
from bot.diagnosis.layers import SEVERITY_WEIGHT, Layer, Severity, layer_rank
from bot.diagnosis.literal_prefix import literal_prefix
from bot.diagnosis.logs import (
    MAX_LINE_CHARS,
    LogCatalog,
    LogClassification,
    LogMatch,
    classify_text,
    parse_log_catalog,
)
from bot.diagnosis.signatures import Signature
from runbooks import LOG_SIGNATURES_FILE
from tests.corpus.scoring import load_corpus
from tests.diagnosis.evidence_helpers import CATALOG

RAW: dict[str, Any] = yaml.safe_load(LOG_SIGNATURES_FILE.read_text(encoding="utf-8"))
REAL_LINES = sorted(
    {example for sig in RAW["signatures"] for example in sig.get("examples", [])}
    | {line for excerpt in load_corpus() for line in excerpt.text.splitlines() if line.strip()}
)
NOISE = ["", " ", "Xid", "NVRM:", "0", "123", "\t", "kernel:", "GPU", "mlx5_core", "…", "é"]


# --- the reference: the scan as it was before issue 21 item 2 ---------------------------------


def reference_classify(text: str, catalog: LogCatalog) -> LogClassification:
    matches = logs._demote_consequences(tuple(_old_scan(text, catalog)), catalog)
    decisive = [m for m in matches if m.layer is not None]
    pool = [m for m in decisive if not m.secondary] or decisive
    best = min(pool, key=_old_strength, default=None)
    codes = {m.xid for m in matches} | {m.caused_by for m in matches}
    xids = tuple(sorted(code for code in codes if code is not None))
    if best is None:
        return LogClassification(matches=matches, xids=xids)
    return LogClassification(
        matches=matches, layer=best.layer, signal=best.signature, xids=xids, decided_by=best
    )


def _old_strength(match: LogMatch) -> tuple[float, int, int]:
    layer = Layer(match.layer) if match.layer else Layer.NONE
    return (-SEVERITY_WEIGHT[Severity(match.severity)], layer_rank(layer), match.line_no)


def _old_scan(text: str, catalog: LogCatalog) -> Iterator[LogMatch]:
    candidates = _old_candidate_lines(text, catalog.keyword_index)
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
                fields = logs._context_fields(sig.context, sig.context_lines, text, start) | fields
            yield _old_make_match(sig, fields, line, line_no, catalog)


def _old_candidate_lines(text: str, index: Mapping[str, tuple[int, ...]]) -> dict[int, set[int]]:
    candidates: dict[int, set[int]] = {}
    for keyword, signatures in index.items():
        at = text.find(keyword)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            candidates.setdefault(start, set()).update(signatures)
            end = text.find("\n", at + len(keyword))
            at = -1 if end < 0 else text.find(keyword, end + 1)
    return candidates


def _old_make_match(
    sig: Signature, fields: dict[str, str], line: str, line_no: int, catalog: LogCatalog
) -> LogMatch:
    xid = int(fields["xid"]) if "xid" in fields else sig.xid
    caused_by = int(fields["caused_by"]) if fields.get("caused_by", "").isdigit() else None
    outcome = logs._outcome(sig, fields, catalog)
    if caused_by is not None and sig.layer_table:
        outcome = logs._attributed(xid, caused_by, catalog)
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


# --- generated logs -----------------------------------------------------------------------------

STAMPS = st.sampled_from(
    [
        "",
        "2026-11-27T02:44:{s:02d}.{n:06d}+00:00 gpu-node-{n:04d} kernel: ",
        "Nov {d:2d} 10:01:{s:02d} node{d} kernel: [{n:>12}.{s:06d}] ",
        "[Sun Nov {d:2d} 10:01:{s:02d} 2026] ",
        "[{n:>5}.{s:06d}] ",
    ]
)


def renumber(line: str, seed: int) -> str:
    """The same message with other numbers, as a storm repeats it."""
    return re.sub(r"\d", lambda m: str((int(m[0]) + seed) % 10), line)


@st.composite
def log_lines(draw: st.DrawFn) -> list[str]:
    body = draw(
        st.one_of(
            st.sampled_from(REAL_LINES),
            st.lists(st.sampled_from(NOISE + REAL_LINES[:40]), max_size=4).map(" ".join),
            st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40),
        )
    )
    stamp = draw(STAMPS)
    repeats = draw(st.integers(1, 4))
    lines = []
    for k in range(repeats):
        s, n, d = draw(st.integers(0, 59)), draw(st.integers(0, 99_999)), draw(st.integers(1, 28))
        renumbered = renumber(body, draw(st.integers(0, 9))) if k and draw(st.booleans()) else body
        lines.append(stamp.format(s=s, n=n, d=d) + renumbered)
    if draw(st.integers(0, 10)) == 0:  # past MAX_LINE_CHARS, the body at either end
        padding = "x" * (MAX_LINE_CHARS - 10)
        lines.append(draw(st.sampled_from([padding + body + body, body + padding + body])))
    return lines


@st.composite
def log_texts(draw: st.DrawFn) -> str:
    lines = [line for group in draw(st.lists(log_lines(), max_size=8)) for line in group]
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return ending.join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=log_texts())
def test_the_scan_gives_what_the_old_scan_gave_on_generated_logs(text: str) -> None:
    assert classify_text(text, CATALOG) == reference_classify(text, CATALOG)


# --- a generated catalog: keywords with digits, zeros and newlines ------------------------------

KEYWORD_ALPHABET = "ab01:\n "
keywords = st.text(alphabet=KEYWORD_ALPHABET, min_size=3, max_size=5)


def small_catalog(found: list[str], regexes: list[str]) -> LogCatalog:
    signatures = [
        {
            "name": f"test.sig{i}",
            "regex": regex,
            "keywords": [keyword],
            "layer": "gpu_hardware",
            "severity": "critical" if i % 2 else "warning",
            "meaning": "generated",
        }
        for i, (keyword, regex) in enumerate(zip(found, regexes, strict=True))
    ]
    raw = {"apiVersion": "gpu-oncall/v1", "kind": "LogSignatureCatalog", "xids": {},
           "signatures": signatures}  # fmt: skip
    return parse_log_catalog(raw, file="generated")


@settings(max_examples=200, deadline=None)
@given(
    found=st.lists(keywords, min_size=1, max_size=6),
    shapes=st.data(),
    text=st.text(alphabet=KEYWORD_ALPHABET + "23\r", max_size=80),
)
def test_the_scan_matches_the_old_one_on_a_generated_catalog(
    found: list[str], shapes: st.DataObject, text: str
) -> None:
    choices = [r"(?P<n>\d+)", "a", r"b[01]+", "0:", r"(?P<w>[ab]+) ?1", "^a"]
    regexes = [shapes.draw(st.sampled_from(choices)) for _ in found]
    catalog = small_catalog(found, regexes)
    assert classify_text(text, catalog) == reference_classify(text, catalog)


# --- the literal prefix -------------------------------------------------------------------------

ATOMS = ["a", "b", "0", ":", " ", r"\(", ".", "[ab]", "[^a]", "[]a]", r"\b", "^", "$",
         "(?=a)", "(?<=a)", "(?<!b)", "(?!0)", r"\d", "(?P<g>a)"]  # fmt: skip
QUANTIFIERS = ["*", "+", "?", "{1,2}", "*?", "{"]
regexes = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
        st.tuples(inner, inner).map(lambda p: f"{p[0]}|{p[1]}"),
        inner.map(lambda r: f"({r})"),
        st.tuples(inner, st.sampled_from(QUANTIFIERS)).map("".join),
        inner.map(lambda r: f"(?i){r}"),
    ),
    max_leaves=6,
)


def groups(found: re.Match[str] | None) -> dict[str, str | None] | None:
    return None if found is None else found.groupdict()


@settings(max_examples=300, deadline=None)
@given(source=regexes, line=st.text(alphabet="ab0: (A", max_size=24))
def test_every_match_starts_with_the_literal_prefix(source: str, line: str) -> None:
    try:
        pattern = re.compile(source)
    except (re.error, OverflowError):
        assume(False)
        return
    prefix = literal_prefix(pattern)
    if not prefix:
        return
    at = line.find(prefix)
    if at < 0:
        assert pattern.search(line) is None
    else:
        assert groups(pattern.search(line)) == groups(pattern.search(line[at:]))


def test_an_xid_storm_shares_one_search_of_the_shipped_xid_signature() -> None:
    xid = next(s for s in CATALOG.signatures if s.name == "kernel.xid")
    assert literal_prefix(xid.pattern) == "NVRM: Xid "

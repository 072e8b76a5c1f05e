"""Log-signature catalog: the schema of runbooks/log_signatures.yaml (pydantic, extra="forbid"),
its loader, and the compiled catalog (regexes compiled once, keywords indexed for the pre-filter).

Pure but for `load_log_catalog` reading the file. Matching lines is `bot.diagnosis.logs`' job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.diagnosis.layers import Severity
from bot.errors import RunbookError

#: The layers a log line may point at (DESIGN §5), bottom-up. Kept equal to LAYER_ORDER by a test.
LayerName = Literal[
    "facility", "fabric", "gpu_hardware", "node_software", "kubernetes", "telemetry", "workload"
]
SeverityName = Literal["info", "warning", "critical"]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader (about ten times faster), the pure-Python one where it is missing."""

UNKNOWN_XID_MEANING = "unknown XID, see NVIDIA catalog"


class LogCatalogError(RunbookError):
    """The log-signature catalog is invalid: `<file>: <field path>: <what is wrong>`."""

    def __init__(self, message: str, *, file: str, field: str | None = None) -> None:
        # The catalog has no steps, and its fields are paths (signatures.3.regex), so the
        # message is formatted here rather than by RunbookError's `field '...'` form.
        Exception.__init__(self, ": ".join(p for p in (file, field, message) if p))
        self.file, self.step, self.field, self.detail = file, None, field, message


# --- YAML schema (pydantic at the edge) ------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class XidSpec(_Strict):
    """One row of the XID table (DOMAIN §2)."""

    mnemonic: str = Field(min_length=1)
    meaning: str = Field(min_length=1)
    layer: LayerName
    nvidia_action: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    remediation: str = Field(min_length=1)
    severity: SeverityName
    application: bool
    secondary: bool = False
    fatal: bool | None = None
    sources: list[str] = Field(default_factory=list)
    checked: date | None = None
    choice: str | None = None
    unverified: list[str] = Field(default_factory=list)
    nonfatal_severity: SeverityName | None = None


class SourceSpec(_Strict):
    """Where XID rows were checked: an address, the day it was read, what it covers."""

    url: str = Field(min_length=1)
    read: date
    note: str = ""


class OutcomeSpec(_Strict):
    """What a field value means: layer (null = context only), severity and meaning."""

    layer: LayerName | None
    severity: SeverityName
    meaning: str = Field(min_length=1)
    secondary: bool = False


class LayerFromSpec(_Strict):
    """The layer depends on a captured field: exact `values` first, then the `xids` table."""

    field: str
    table: Literal["xids"] | None = None
    values: dict[str, OutcomeSpec] = Field(default_factory=dict)


class ContextSpec(_Strict):
    """An earlier line (at most `lines` back) that supplies fields missing on the matched line."""

    regex: str
    lines: int = Field(default=3, ge=1, le=20)


class SignatureSpec(_Strict):
    """One recognised log line; the keys are explained at the top of log_signatures.yaml."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
    regex: str
    keywords: list[Annotated[str, Field(min_length=3)]] = Field(min_length=1)
    layer: LayerName | None
    severity: SeverityName
    meaning: str = Field(min_length=1)
    layer_from: LayerFromSpec | None = None
    secondary: bool = False
    secondary_when: list[str] = Field(default_factory=list)
    xid: int | None = None
    context: ContextSpec | None = None
    secondary_with_xids: list[int] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class CatalogSpec(_Strict):
    """The whole file: apiVersion gpu-oncall/v1, kind LogSignatureCatalog."""

    apiVersion: Literal["gpu-oncall/v1"]
    kind: Literal["LogSignatureCatalog"]
    sources: dict[str, SourceSpec] = Field(default_factory=dict)
    xids: dict[int, XidSpec]
    signatures: list[SignatureSpec] = Field(min_length=1)


# --- compiled catalog -------------------------------------------------------------------------


@dataclass(frozen=True)
class XidInfo:
    """An XID table row. Unknown codes get layer None and meaning UNKNOWN_XID_MEANING."""

    code: int
    mnemonic: str
    meaning: str
    layer: str | None
    nvidia_action: str
    remediation: str
    severity: str
    application: bool = False
    secondary: bool = False
    fatal: bool | None = None
    sources: tuple[str, ...] = ()
    checked: str | None = None
    choice: str | None = None
    unverified: tuple[str, ...] = ()
    nonfatal_severity: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What a match means: its layer (None = context only), severity and meaning."""

    layer: str | None
    severity: str
    meaning: str
    secondary: bool = False


@dataclass(frozen=True)
class Signature:
    """A compiled signature. See the comment at the top of log_signatures.yaml."""

    name: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    default: Outcome
    layer_field: str | None = None
    layer_values: Mapping[str, Outcome] = field(default_factory=dict)
    layer_table: bool = False
    secondary_when: tuple[str, ...] = ()
    xid: int | None = None
    context: re.Pattern[str] | None = None
    context_lines: int = 0
    #: the match is a consequence (secondary) when any of these XIDs is in the same text
    secondary_with_xids: frozenset[int] = frozenset()


@dataclass(frozen=True)
class LogCatalog:
    """The loaded catalog: the XID table and the signatures in file order."""

    file: str
    xids: Mapping[int, XidInfo]
    signatures: tuple[Signature, ...]
    #: keyword -> indexes (into `signatures`) of the signatures that list it
    keyword_index: Mapping[str, tuple[int, ...]]

    def names(self) -> list[str]:
        return [s.name for s in self.signatures]


# --- loading ----------------------------------------------------------------------------------


def load_log_catalog(path: Path) -> LogCatalog:
    """Read and validate the catalog. Raises LogCatalogError naming the file and the field."""
    file = str(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 (a safe loader)
    except OSError as exc:
        raise LogCatalogError(f"cannot read: {exc.strerror}", file=file) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise LogCatalogError(f"{where}not valid YAML ({problem})", file=file) from exc
    return parse_log_catalog(raw, file=file)


def parse_log_catalog(raw: Any, *, file: str) -> LogCatalog:
    """Validate an already-parsed YAML document and compile it."""
    if not isinstance(raw, dict):
        raise LogCatalogError("the catalog must be a YAML mapping", file=file)
    try:
        spec = CatalogSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise LogCatalogError(first["msg"], file=file, field=where) from exc
    for code, row in spec.xids.items():
        for name in row.sources:
            if name not in spec.sources:
                known = ", ".join(sorted(spec.sources)) or "none"
                raise LogCatalogError(
                    f"unknown source '{name}' (sources: {known})", file=file, field=f"xids.{code}"
                )
    xids = {code: _xid_info(code, row) for code, row in sorted(spec.xids.items())}
    signatures = tuple(
        _compile_signature(sig, file=file, where=f"signatures.{i}")
        for i, sig in enumerate(spec.signatures)
    )
    _check_unique(signatures, file=file)
    index: dict[str, list[int]] = {}
    for i, sig in enumerate(signatures):
        for keyword in sig.keywords:
            index.setdefault(keyword, []).append(i)
    keyword_index = {k: tuple(v) for k, v in index.items()}
    catalog = LogCatalog(file=file, xids=xids, signatures=signatures, keyword_index=keyword_index)
    _check_examples(spec, catalog)
    return catalog


def _xid_info(code: int, row: XidSpec) -> XidInfo:
    return XidInfo(
        code=code,
        mnemonic=row.mnemonic,
        meaning=row.meaning,
        layer=row.layer,
        nvidia_action=row.nvidia_action,
        remediation=row.remediation,
        severity=row.severity,
        application=row.application,
        secondary=row.secondary,
        fatal=row.fatal,
        sources=tuple(row.sources),
        checked=row.checked.isoformat() if row.checked else None,
        choice=row.choice,
        unverified=tuple(row.unverified),
        nonfatal_severity=row.nonfatal_severity,
    )


def _compile(regex: str, *, file: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise LogCatalogError(f"bad regex: {exc}", file=file, field=where) from exc


def _compile_signature(sig: SignatureSpec, *, file: str, where: str) -> Signature:
    pattern = _compile(sig.regex, file=file, where=f"{where}.regex")
    groups = set(pattern.groupindex)
    rule = sig.layer_from
    needed = [(f"{where}.layer_from.field", rule.field)] if rule else []
    needed += [(f"{where}.secondary_when.{i}", name) for i, name in enumerate(sig.secondary_when)]
    for at, name in needed:
        if name not in groups:
            have = ", ".join(sorted(groups)) or "none"
            raise LogCatalogError(
                f"no capture group '{name}' in regex (groups: {have})", file=file, field=at
            )
    if sig.layer is None and rule is None and sig.severity != "info":
        raise LogCatalogError(
            "a context signature (layer null, no layer_from) must have severity info",
            file=file,
            field=f"{where}.severity",
        )
    context = sig.context
    context_pattern = (
        _compile(context.regex, file=file, where=f"{where}.context.regex") if context else None
    )
    return Signature(
        name=sig.name,
        pattern=pattern,
        keywords=tuple(sig.keywords),
        default=Outcome(sig.layer, sig.severity, sig.meaning, sig.secondary),
        layer_field=rule.field if rule else None,
        layer_values={k: Outcome(**v.model_dump()) for k, v in rule.values.items()} if rule else {},
        layer_table=bool(rule and rule.table == "xids"),
        secondary_when=tuple(sig.secondary_when),
        xid=sig.xid,
        context=context_pattern,
        context_lines=context.lines if context else 0,
        secondary_with_xids=frozenset(sig.secondary_with_xids),
    )


def _check_unique(signatures: tuple[Signature, ...], *, file: str) -> None:
    seen: dict[str, int] = {}
    for i, sig in enumerate(signatures):
        if sig.name in seen:
            raise LogCatalogError(
                f"duplicate signature name '{sig.name}' (also signatures.{seen[sig.name]})",
                file=file,
                field=f"signatures.{i}.name",
            )
        seen[sig.name] = i


def _check_examples(spec: CatalogSpec, catalog: LogCatalog) -> None:
    """Every example line must pass the pre-filter and match its own signature."""
    for i, (sig_spec, sig) in enumerate(zip(spec.signatures, catalog.signatures, strict=True)):
        for j, example in enumerate(sig_spec.examples):
            where = f"signatures.{i}.examples.{j}"
            if not any(k in example for k in sig.keywords):
                raise LogCatalogError(
                    f"contains none of the keywords {list(sig.keywords)}",
                    file=catalog.file,
                    field=where,
                )
            if not sig.pattern.search(example):
                raise LogCatalogError(
                    f"does not match the regex of '{sig.name}'", file=catalog.file, field=where
                )


# --- XIDs ------------------------------------------------------------------------------------


def xid_info(code: int, catalog: LogCatalog) -> XidInfo:
    """The XID table row for `code`; unknown codes get layer None (look them up at NVIDIA)."""
    known = catalog.xids.get(code)
    if known is not None:
        return known
    return XidInfo(
        code=code,
        mnemonic="UNKNOWN",
        meaning=UNKNOWN_XID_MEANING,
        layer=None,
        nvidia_action="UNKNOWN",
        remediation="look the code up in the NVIDIA Xid catalog",
        severity=Severity.WARNING.value,
    )

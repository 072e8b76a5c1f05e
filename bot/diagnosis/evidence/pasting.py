"""One verdict for one pasted text, as `gpu-oncall classify-log` gives it: the log-signature
catalog's matches, and, when the text holds a tool output, the evidence report, whose verdict
then decides. Pure: no I/O; the CLI, `/gpu classify` and the corpus test share it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.diagnosis.evidence.loglines import FORMATS
from bot.diagnosis.evidence.recognizing import EvidenceReport, recognize
from bot.diagnosis.logs import LogCatalog, LogClassification, classify_text

LOG_FORMATS = frozenset(FORMATS.values())


@dataclass(frozen=True)
class PasteVerdict:
    """The deciding layer (None: no fault), its signal, and what each path made of the text."""

    layer: str | None
    signal: str | None
    classification: LogClassification
    evidence: EvidenceReport
    """Everything recognised (status, formats, lines not understood), logs included."""

    @property
    def report(self) -> EvidenceReport | None:
        """The evidence report when a tool output (not only log lines) was recognised: its
        verdict then decides."""
        tools = any(fmt not in LOG_FORMATS for _, fmt in self.evidence.formats)
        return self.evidence if tools else None


def classify_paste(text: str, *, catalog: LogCatalog, source: str = "stdin") -> PasteVerdict:
    """Classify any pasted text the way `classify-log` does."""
    found = classify_text(text, catalog)
    report = recognize([(source, text)], catalog=catalog)
    if not any(fmt not in LOG_FORMATS for _, fmt in report.formats):
        return PasteVerdict(found.layer, found.signal, found, report)
    layer = None if report.layer.value == "none" else report.layer.value
    signal = report.deciding[0].code if report.deciding else None
    return PasteVerdict(layer, signal, found, report)

"""Shared by the evidence tests: the fixtures directory and the shipped log catalog."""

from __future__ import annotations

from pathlib import Path

from bot.diagnosis.evidence import EvidenceReport, recognize
from bot.diagnosis.logs import load_log_catalog
from runbooks import LOG_SIGNATURES_FILE

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
CATALOG = load_log_catalog(LOG_SIGNATURES_FILE)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def report_of(*names: str) -> EvidenceReport:
    return recognize([(name, fixture(name)) for name in names], catalog=CATALOG)

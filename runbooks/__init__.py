"""Shipped runbooks, the signal catalog and the log-signature catalog (data, not code)."""

from pathlib import Path

RUNBOOK_DIR = Path(__file__).resolve().parent
SIGNALS_FILE = RUNBOOK_DIR / "signals.yaml"
LOG_SIGNATURES_FILE = RUNBOOK_DIR / "log_signatures.yaml"

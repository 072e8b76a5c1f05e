"""Counters of this process: alerts received, deduplicated, unroutable and storm members;
webhooks by HTTP code; triage runs by outcome. Webhook handlers and triage workers add to them;
`/metrics` (bot/serving/exposition.py) exposes them."""

from __future__ import annotations

import threading
from collections import Counter

COUNTERS: dict[str, str] = {
    "alerts_received_total": "Alerts received in webhooks (every delivery, duplicates too).",
    "alerts_deduplicated_total": "Alert deliveries already stored (same fingerprint, status, "
    "startsAt): nothing new was created.",
    "alerts_unroutable_total": "Alerts that matched no runbook; stored and listed by "
    "`gpu-oncall alerts --unrouted`.",
    "alert_storms_total": "Alerts that joined a storm's parent incident.",
}


class IntakeCounters:
    """Thread-safe counters of this process; webhook handlers and triage workers add to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plain: Counter[str] = Counter()
        self._webhooks: Counter[str] = Counter()
        self._triage: Counter[str] = Counter()
        self.queue_depth = 0
        self.leader = 0  # 1 while this process runs the periodic jobs (bot/work/scheduler.py)

    def add(self, name: str, amount: int = 1) -> None:
        if name not in COUNTERS:
            raise KeyError(f"unknown counter '{name}' (counters: {', '.join(COUNTERS)})")
        with self._lock:
            self._plain[name] += amount

    def webhook(self, code: int) -> None:
        with self._lock:
            self._webhooks[str(code)] += 1

    def triage(self, outcome: str) -> None:
        with self._lock:
            self._triage[outcome] += 1

    def snapshot(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self._plain), dict(self._webhooks), dict(self._triage)

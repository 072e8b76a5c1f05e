"""Fault history per GPU over the database: the reader a run consults before proposing, and the
facts the recorder writes when a verdict names a GPU or an action touches one.

The pure counting and the ladder are bot.diagnosis.history; this module only moves facts between
the verdict/act outputs and storage/gpu_history.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine

from bot.diagnosis.history import RESETS, GpuFact, gpu_key
from storage import gpu_history as store

#: Actions recorded against a GPU's history (resets, and the ways a GPU leaves service).
RECORDED_ACTIONS = RESETS | {"drain", "cordon", "open_ticket"}


class StoredGpuHistory:
    """GpuHistory over the `gpu_history` table (one short session per read)."""

    def __init__(self, db: Engine) -> None:
        self._db = db

    def read(self, keys: Sequence[str], *, since: datetime) -> list[GpuFact]:
        rows = store.read_history_uncommitted(self._db, keys=keys, since=since)
        return [
            GpuFact(
                gpu_key=key,
                kind=kind,
                what=what,
                at=at,
                incident=f"INC-{incident_id}" if incident_id is not None else None,
            )
            for key, kind, what, at, incident_id in rows
        ]


def finding_facts(
    verdict: Mapping[str, Any], *, run_id: str, incident_id: int, at: datetime
) -> list[dict[str, Any]]:
    """One `finding` fact per GPU record of a verdict (`history` of the localize output)."""
    return [
        {
            "gpu_key": r["gpu_key"],
            "uuid": r.get("uuid"),
            "node": r["node"],
            "gpu": r.get("gpu"),
            "kind": "finding",
            "what": r["what"],
            "incident_id": incident_id,
            "run_id": run_id,
            "detail": str(r.get("text", ""))[:300],
            "at": at,
        }
        for r in verdict.get("history", [])
    ]


def action_facts(
    results: Sequence[Mapping[str, Any]],
    verdict: Mapping[str, Any],
    *,
    run_id: str,
    incident_id: int,
    at: datetime,
) -> list[dict[str, Any]]:
    """One `action` fact per carried-out action on a node whose GPU the verdict blamed."""
    records = list(verdict.get("history", []))
    facts = []
    for result in results:
        action = str(result.get("action", ""))
        done = result.get("outcome") in ("changed", "already_done")
        if action not in RECORDED_ACTIONS or not done:
            continue
        target = str(result.get("target", ""))
        for r in records:
            if r["node"] != target:
                continue
            key = r.get("gpu_key") or gpu_key(node=target, gpu=r.get("gpu"), uuid=r.get("uuid"))
            facts.append(
                {
                    "gpu_key": key,
                    "uuid": r.get("uuid"),
                    "node": target,
                    "gpu": r.get("gpu"),
                    "kind": "action",
                    "what": action,
                    "incident_id": incident_id,
                    "run_id": run_id,
                    "detail": str(result.get("detail", ""))[:300],
                    "at": at,
                }
            )
    return facts

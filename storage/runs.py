"""Runbook run and finding queries (keyword-only, one session passed in, no commits here).

A run's id is its LangGraph thread_id; the graph state itself lives in the checkpointer, this
table holds what people ask about a run: status, verdict, query count, error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from storage.errors import InvalidValueError, RecordNotFoundError
from storage.tables import FindingRow, RunbookRun

RUN_STATUSES = frozenset({"running", "awaiting_approval", "completed", "failed", "rejected"})


def _check_status(status: str) -> str:
    if status not in RUN_STATUSES:
        valid = ", ".join(sorted(RUN_STATUSES))
        raise InvalidValueError(f"unknown run status '{status}' (statuses: {valid})")
    return status


def create_run(
    session: Session,
    *,
    run_id: str,
    incident_id: int,
    runbook: str,
    inputs: Mapping[str, Any],
    at: datetime,
) -> RunbookRun:
    """Record a run that starts now (status `running`)."""
    run = RunbookRun(
        id=run_id, incident_id=incident_id, runbook=runbook, inputs=dict(inputs), started_at=at
    )
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, run_id: str) -> RunbookRun | None:
    """The run with this id, or None."""
    return session.get(RunbookRun, run_id)


def update_run(
    session: Session,
    run_id: str,
    *,
    status: str | None = None,
    finished_at: datetime | None = None,
    verdict: Mapping[str, Any] | None = None,
    queries: int | None = None,
    error: str | None = None,
) -> None:
    """Change the given fields of a run (None leaves a field as it is), in one UPDATE.

    The session is flushed first (its pending changes keep their order), and a copy of the run
    it holds is expired, so it reads the new values."""
    changes = {
        "status": None if status is None else _check_status(status),
        "finished_at": finished_at,
        "verdict": None if verdict is None else dict(verdict),
        "queries": queries,
        "error": error,
    }
    values = {name: value for name, value in changes.items() if value is not None}
    if not values:
        if get_run(session, run_id) is None:
            raise RecordNotFoundError(f"no runbook run '{run_id}'")
        return
    session.flush()
    table = RunbookRun.__table__  # type: ignore[attr-defined]
    result = session.connection().execute(
        update(table).where(table.c.id == run_id).values(values)
    )
    if result.rowcount == 0:
        raise RecordNotFoundError(f"no runbook run '{run_id}'")
    held = session.identity_map.get(session.identity_key(RunbookRun, run_id))
    if held is not None:
        session.expire(held, list(values))


def latest_run_for_incident(session: Session, incident_id: int) -> RunbookRun | None:
    """The incident's most recently started run, or None."""
    statement = (
        select(RunbookRun)
        .where(RunbookRun.incident_id == incident_id)
        .order_by(col(RunbookRun.started_at).desc(), col(RunbookRun.id).desc())
    )
    return session.exec(statement).first()


def list_runs_for_incident(session: Session, incident_id: int) -> list[RunbookRun]:
    """Every run of an incident, oldest first."""
    statement = (
        select(RunbookRun)
        .where(RunbookRun.incident_id == incident_id)
        .order_by(col(RunbookRun.started_at), col(RunbookRun.id))
    )
    return list(session.exec(statement))


def add_findings(
    session: Session,
    *,
    run_id: str,
    incident_id: int,
    findings: Iterable[Mapping[str, Any]],
    at: datetime,
) -> list[FindingRow]:
    """Store findings, each shaped like `bot.diagnosis.findings.Finding.to_dict()`."""
    rows = [
        FindingRow(**finding_values(run_id=run_id, incident_id=incident_id, finding=f, at=at))
        for f in findings
    ]
    session.add_all(rows)
    session.flush()
    return rows


def finding_values(
    *, run_id: str, incident_id: int, finding: Mapping[str, Any], at: datetime
) -> dict[str, Any]:
    """The `findings` row of one finding shaped like `Finding.to_dict()`."""
    return {
        "run_id": run_id,
        "incident_id": incident_id,
        "check_id": str(finding["check_id"]),
        "layer": str(finding["layer"]),
        "severity": str(finding["severity"]),
        "summary": str(finding["summary"]),
        "evidence": list(finding.get("evidence", [])),
        "culprit": dict(finding.get("culprit", {})),
        "at": at,
    }


def insert_findings(session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Store many `finding_values` rows in one statement; ids follow the given order."""
    if rows:
        table: Any = FindingRow.__table__  # type: ignore[attr-defined]
        session.connection().execute(table.insert(), list(rows))


def list_findings(session: Session, *, run_id: str) -> list[FindingRow]:
    """A run's findings in the order they were stored."""
    statement = select(FindingRow).where(FindingRow.run_id == run_id).order_by(col(FindingRow.id))
    return list(session.exec(statement))

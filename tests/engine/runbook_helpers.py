"""Test helpers: an ECC-storm runbook written in place (read the DBE rate, find the storm,
localize, propose, approve, act, then any further steps), loaded against a runtime's catalogs,
started on one node, and the incident it left read back.

Shared by tests/actions/test_policy_yaml.py, tests/engine/test_verify_monitoring.py and
tests/engine/test_loud_errors.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.engine.loading import LoadedRunbook, parse_runbook
from bot.engine.running import RunOutcome
from bot.wiring.runtime import Runtime
from storage import incidents as incident_store
from storage.db import session_scope
from storage.tables import Incident, TimelineEvent

NODE = "gpu-node-03"
CORDON = {"action": "cordon", "reason": "keep new work off"}


def ecc_runbook(
    name: str,
    *,
    propose: Sequence[Mapping[str, Any]] = (CORDON,),
    policy: Mapping[str, Any],
    then: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The runbook `name` as its YAML would read, on input `node`, with `policy` and the
    steps in `then` after the action."""
    steps: list[Mapping[str, Any]] = [
        {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
        {
            "id": "storm",
            "check": "dbe.max > 0.0",
            "layer": "gpu_hardware",
            "severity": "critical",
            "finding": "ECC errors on {{ node }}",
            "culprit": {"node": "{{ node }}"},
        },
        {"id": "where", "localize": {}},
        {"id": "fix", "propose": list(propose)},
        {"id": "approval", "approve": {}},
        {"id": "execute", "act": {}},
        *then,
    ]
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Runbook",
        "metadata": {"name": name},
        "inputs": {"node": {"type": "node", "required": True}},
        "policy": dict(policy),
        "steps": steps,
    }


def load(rt: Runtime, raw: Mapping[str, Any], *, file: str) -> LoadedRunbook:
    """`raw` parsed against the runtime's signals and actions, as if read from `file`."""
    return parse_runbook(
        dict(raw), file=file, signals=rt.deps.signals.names(), actions=rt.deps.actions.names()
    )


def open_incident(rt: Runtime, loaded: LoadedRunbook, *, requester: str = "cli:dave") -> int:
    """An incident for `loaded` on NODE, opened by `requester`; its id."""
    incident_id, _ = rt.engine.open_incident(loaded, {"node": NODE}, actor=requester)
    return incident_id


def start(
    rt: Runtime,
    loaded: LoadedRunbook,
    *,
    incident_id: int | None = None,
    requester: str = "cli:dave",
) -> RunOutcome:
    """A run of `loaded` on NODE requested by `requester` (in a new incident unless given)."""
    if incident_id is None:
        incident_id = open_incident(rt, loaded, requester=requester)
    return rt.engine.start(
        loaded, inputs={"node": NODE}, incident_id=incident_id, requester=requester
    )


def incident_record(rt: Runtime, incident_id: int) -> tuple[Incident, list[TimelineEvent]]:
    """The incident as stored, and its timeline."""
    with session_scope(rt.db) as session:
        incident = incident_store.get_incident(session, incident_id)
        assert incident is not None
        return incident, incident_store.list_events(session, incident_id)

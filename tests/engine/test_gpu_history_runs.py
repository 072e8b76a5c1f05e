"""Fault history per GPU through whole runs (issue 14, part 3): a verdict that blames a GPU is
kept under the GPU's UUID, and the next run on that GPU reads it back, says how often it failed
and was reset, and escalates the proposals by the ladder.

Aspects: the first run records "1st XID 79" under the UUID the exporter reports; after two
earlier resets the next run says "2nd XID 79 on this GPU in 30 days, after 2 resets", climbs to
the RMA rung (cordon + RMA ticket, no further reset); re-running the same incident is not a
recurrence.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings, StorageSettings
from bot.engine.gpu_records import StoredGpuHistory
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import Runtime, open_runtime
from simulator import SCENARIO_DIR
from simulator.scenarios import load_scenario
from storage import gpu_history
from storage.db import session_scope


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    base = isolated(Settings())
    storage = StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}")
    scenario = load_scenario(Path(SCENARIO_DIR) / "xid-79-fallen-off-bus.yaml")
    settings = base.model_copy(update={"storage": storage})
    with open_runtime(settings, scenario=scenario, fresh=True) as rt:
        yield rt


def diagnose(rt: Runtime) -> tuple[dict[str, Any], dict[str, Any]]:
    assert rt.scenario is not None
    outcome = trigger(rt, rt.scenario).outcome
    assert outcome is not None
    propose = next(o for o in outcome.steps.values() if o.get("kind") == "propose")
    return outcome.verdict, propose


def test_a_repeat_fault_after_two_resets_climbs_to_rma(runtime: Runtime) -> None:
    verdict, _ = diagnose(runtime)
    [first] = verdict["history"]
    assert first["uuid"].startswith("GPU-") and first["gpu_key"] == first["uuid"]
    assert (first["node"], first["gpu"], first["what"]) == ("gpu-node-02", "4", "xid 79")
    assert first["text"] == "1st XID 79 on this GPU in 30 days, no reset before"
    now = runtime.clock.now()
    stored = StoredGpuHistory(runtime.db).read([first["gpu_key"]], since=now - timedelta(days=1))
    assert [(f.kind, f.what) for f in stored] == [("finding", "xid 79")]

    again, _ = diagnose(runtime)  # the same incident run again: not a recurrence
    assert again["history"][0]["occurrences"] == 1

    gpu = {k: first[k] for k in ("gpu_key", "uuid", "node", "gpu")}
    twelve, twenty = now - timedelta(days=12), now - timedelta(days=20)
    with session_scope(runtime.db) as session:
        gpu_history.record_facts(
            session,
            [
                gpu | {"kind": "finding", "what": "xid 79", "run_id": "old", "at": twelve},
                gpu | {"kind": "action", "what": "gpu_reset", "run_id": "old", "at": twelve},
                gpu | {"kind": "action", "what": "gpu_reset", "run_id": "older", "at": twenty},
            ],
        )
    verdict, propose = diagnose(runtime)
    [record] = verdict["history"]
    assert record["text"] == "2nd XID 79 on this GPU in 30 days, after 2 resets"
    assert record["rung"] == "rma"
    told = "GPU 4 on gpu-node-02: 2nd XID 79 on this GPU in 30 days, after 2 resets"
    assert told in verdict["summary"]
    planned = [(p["action"], p["params"].get("queue")) for p in propose["proposals"]]
    assert ("cordon", None) in planned and ("open_ticket", "rma") in planned
    assert "gpu_reset" not in [a for a, _ in planned]

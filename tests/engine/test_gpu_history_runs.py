"""Fault history per GPU through whole runs (issue 14, part 3): a verdict that blames a GPU is
kept under the GPU's UUID, and the next run on that GPU reads it back, says how often it failed
and was reset, and escalates the proposals by the ladder.

Aspects: the first run records "1st XID 79" under the UUID the exporter reports; after two
earlier resets the next run says "2nd XID 79 on this GPU in 30 days, after 2 resets", climbs to
the RMA rung (cordon + RMA ticket, no further reset); re-running the same incident is not a
recurrence. The same with telemetry across the network (`parallel_reads`), where the look back
is read while the liveness probe asks telemetry, not after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings, StorageSettings
from bot.diagnosis.history import GpuFact
from bot.engine.gpu_records import StoredGpuHistory
from bot.engine.steps.liveness import SIGNAL as ENERGY
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import Runtime, open_runtime
from integrations.telemetry import SignalQuery, SignalResult
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


def across_the_network(rt: Runtime) -> None:
    """The runtime's reads as if its telemetry answered from another machine."""
    rt.deps = rt.engine.deps = replace(rt.deps, parallel_reads=True)


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "across-the-network"])
def test_a_repeat_fault_after_two_resets_climbs_to_rma(runtime: Runtime, remote: bool) -> None:
    if remote:
        across_the_network(runtime)
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


class _Recorded:
    """The history port, telling when it is read."""

    def __init__(self, inner: StoredGpuHistory) -> None:
        self.inner, self.read_started = inner, threading.Event()

    def read(self, keys: Sequence[str], *, since: datetime) -> list[GpuFact]:
        self.read_started.set()
        return self.inner.read(keys, since=since)


class _ProbeWaits:
    """The telemetry port, whose liveness probe answers only once the history is being read
    (or after 30 s, an upper bound: then the look back was not read meanwhile)."""

    def __init__(self, inner: Any, history: _Recorded) -> None:
        self.inner, self.history, self.seen = inner, history, list[bool]()

    def read(self, query: SignalQuery) -> SignalResult:
        if query.signal == ENERGY:
            self.seen.append(self.history.read_started.wait(30))
        return self.inner.read(query)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_look_back_is_read_while_the_probe_asks_telemetry(runtime: Runtime) -> None:
    history = _Recorded(StoredGpuHistory(runtime.db))
    telemetry = _ProbeWaits(runtime.deps.telemetry, history)
    runtime.deps = runtime.engine.deps = replace(
        runtime.deps, history=history, telemetry=telemetry, parallel_reads=True
    )
    verdict, _ = diagnose(runtime)
    assert telemetry.seen == [True]  # the probe was asked once, the history read meanwhile
    [record] = verdict["history"]
    assert record["text"] == "1st XID 79 on this GPU in 30 days, no reset before"

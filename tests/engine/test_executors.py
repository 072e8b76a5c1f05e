"""The shared step pool's inline calls (bot/engine/executors.py).

Covers: a run's checkpoint puts into the engine's saver (SQLite and a real PostgreSQL) are made
in the thread that streams its graph, not handed to a pool thread that the stream then waits
for, and the run's checkpoint is on disk as before; a saver that holds nothing in memory
(LangGraph's own in-memory saver) still gets its puts on the pool.
"""

from __future__ import annotations

import threading
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from bot.engine import executors
from bot.wiring.runtime import Runtime
from storage.checkpointer_savers import BufferedWrites
from tests.engine.conftest import ON_BOTH

HEALTHY = "gpu-node-05"  # ecc-dbe-storm's faulty node is gpu-node-03


@ON_BOTH
def test_a_runs_checkpoint_puts_are_made_in_the_thread_that_streams_it(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    put = BufferedWrites.put

    def recorded(self: BufferedWrites, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return put(self, *args)

    monkeypatch.setattr(BufferedWrites, "put", recorded)
    loaded = rt.catalog.get("ecc-storm")
    incident_id, _ = rt.engine.open_incident(loaded, {"node": HEALTHY}, actor="alertmanager")
    outcome = rt.engine.start(
        loaded, inputs={"node": HEALTHY}, incident_id=incident_id, requester="alertmanager"
    )
    assert outcome.status == "completed"
    assert threads and set(threads) == {threading.current_thread().name}
    config = {"configurable": {"thread_id": outcome.run_id}}
    assert rt.engine.checkpointer.get_tuple(config) is not None  # on disk, as before


class _State(TypedDict):
    n: int


def test_a_saver_that_holds_nothing_gets_its_puts_on_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executors.share()
    saver = InMemorySaver()
    threads: list[str] = []
    put = saver.put

    def recorded(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return put(*args)

    monkeypatch.setattr(saver, "put", recorded)
    graph = StateGraph(_State)
    graph.add_node("one", lambda state: {"n": state["n"] + 1})
    graph.add_edge(START, "one")
    graph.add_edge("one", END)
    app = graph.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    chunks = list(app.stream({"n": 1}, config, durability="sync"))
    assert chunks == [{"one": {"n": 2}}]
    here = threading.current_thread().name
    assert threads and all(name != here and name.startswith("steps") for name in threads)

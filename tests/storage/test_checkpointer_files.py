"""The LangGraph checkpointer factory.

Covers: for a SQLite database the checkpoints live in a file beside it
(`oncall.db` -> `oncall.checkpoints.db`), created with its directory; a graph interrupted for
approval resumes from a new saver on the same file (a restart loses nothing); in-memory SQLite
gets an in-memory saver; a PostgreSQL URL without `langgraph-checkpoint-postgres` says what to
install; other backends are refused with the supported ones listed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from storage.checkpointer import checkpoint_path, make_checkpointer
from storage.errors import BackendNotInstalledError, InvalidDatabaseUrlError


class State(TypedDict, total=False):
    decision: str
    acted: bool


def _approve(state: State) -> State:
    return {"decision": str(interrupt({"action": "cordon", "target": "gpu-node-03"}))}


def _act(state: State) -> State:
    return {"acted": state.get("decision") == "approve"}


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(State)
    graph.add_node("approve", _approve)
    graph.add_node("act", _act)
    graph.add_edge(START, "approve")
    graph.add_edge("approve", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=saver)


def test_checkpoints_live_in_a_file_beside_the_database(tmp_path: Path) -> None:
    db = tmp_path / "state" / "oncall.db"
    with make_checkpointer(f"sqlite:///{db}") as saver:
        assert isinstance(saver, SqliteSaver)
    assert checkpoint_path(db) == tmp_path / "state" / "oncall.checkpoints.db"
    assert (tmp_path / "state" / "oncall.checkpoints.db").is_file()


def test_an_interrupted_run_resumes_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'oncall.db'}"
    config = {"configurable": {"thread_id": "run-1"}}
    with make_checkpointer(url) as saver:
        first = _graph(saver).invoke({}, config, durability="sync")
        assert first["__interrupt__"][0].value == {"action": "cordon", "target": "gpu-node-03"}
    with make_checkpointer(url) as saver:  # a new process: new connection, new graph
        final = _graph(saver).invoke(Command(resume="approve"), config, durability="sync")
    assert final == {"decision": "approve", "acted": True}


def test_in_memory_sqlite_gets_an_in_memory_saver() -> None:
    with make_checkpointer("sqlite://") as saver:
        assert isinstance(saver, InMemorySaver)


def test_postgres_without_the_saver_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Simulate the package being absent even where it is installed: a None entry in
    # sys.modules makes the import fail exactly as a missing package would.
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.postgres", None)
    with (
        pytest.raises(BackendNotInstalledError, match="pip install langgraph-checkpoint-postgres"),
        make_checkpointer("postgresql+psycopg://oncall@db/oncall"),
    ):
        pass


def test_other_backends_are_refused_with_the_supported_ones() -> None:
    with (
        pytest.raises(InvalidDatabaseUrlError, match="supported: sqlite"),
        make_checkpointer("mysql://oncall@db/oncall"),
    ):
        pass

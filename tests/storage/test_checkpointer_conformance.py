"""Checkpointer conformance: the savers `storage.checkpointer.make_checkpointer` builds agree.

Every case runs against the SQLite file saver, the in-memory saver (SQLite `sqlite://`) and the
PostgreSQL saver (a fresh database of the session's server); the cases that reopen the saver
(a new process in production) run against the two durable ones, since an in-memory saver dies
with its process by design.

Covers: a graph stops at its approval interrupt, and the saved checkpoint names the node waiting
and the interrupt's payload; resuming it (in the same saver, or in a new saver on the same
database) finishes it exactly once; `list` returns a thread's checkpoints newest first, honours
`limit`, and never mixes threads; `get_tuple` returns the latest state or the one a
`checkpoint_id` names, and None for an unknown thread; a finished thread continued after
reopening keeps its accumulated state.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from storage.checkpointer import make_checkpointer

Opener = Callable[[], AbstractContextManager[BaseCheckpointSaver[Any]]]
APPROVAL = {"action": "cordon", "target": "gpu-node-03"}


class State(TypedDict, total=False):
    decision: str
    acted: Annotated[list[str], operator.add]


def _approve(state: State) -> State:
    return {"decision": str(interrupt(APPROVAL))}


def _act(state: State) -> State:
    return {"acted": [f"cordon:{state.get('decision')}"]}


def graph(saver: BaseCheckpointSaver[Any]) -> Any:
    built = StateGraph(State)
    built.add_node("approve", _approve)
    built.add_node("act", _act)
    built.add_edge(START, "approve")
    built.add_edge("approve", "act")
    built.add_edge("act", END)
    return built.compile(checkpointer=saver)


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def _url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    if backend == "sqlite-memory":
        return "sqlite://"
    return f"sqlite:///{tmp_path / 'oncall.db'}"


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def open_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a saver on one database (each call: a new saver, as a new process would)."""
    url = _url(str(request.param), tmp_path, request)
    return lambda: make_checkpointer(url)


@pytest.fixture(params=["sqlite-file", "postgres"])
def reopen_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Like `open_saver`, on the durable savers only: what one saver wrote, the next reads."""
    url = _url(str(request.param), tmp_path, request)
    return lambda: make_checkpointer(url)


@pytest.fixture
def saver(open_saver: Opener) -> Iterator[BaseCheckpointSaver[Any]]:
    with open_saver() as opened:
        yield opened


def test_a_run_stops_at_its_approval_and_the_checkpoint_says_where(
    saver: BaseCheckpointSaver[Any],
) -> None:
    first = graph(saver).invoke({}, thread("run-1"), durability="sync")
    assert [i.value for i in first["__interrupt__"]] == [APPROVAL]
    state = graph(saver).get_state(thread("run-1"))
    assert state.next == ("approve",)
    assert [i.value for i in state.interrupts] == [APPROVAL]


def test_resuming_in_the_same_saver_finishes_the_run_once(
    saver: BaseCheckpointSaver[Any],
) -> None:
    graph(saver).invoke({}, thread("run-1"), durability="sync")
    final = graph(saver).invoke(Command(resume="approve"), thread("run-1"), durability="sync")
    assert final == {"decision": "approve", "acted": ["cordon:approve"]}
    assert graph(saver).get_state(thread("run-1")).next == ()


def test_a_run_interrupted_in_one_saver_resumes_in_a_new_one(reopen_saver: Opener) -> None:
    with reopen_saver() as saver:
        graph(saver).invoke({}, thread("run-1"), durability="sync")
    with reopen_saver() as saver:  # a new process: new connections, a new graph
        assert graph(saver).get_state(thread("run-1")).next == ("approve",)
        final = graph(saver).invoke(Command(resume="reject"), thread("run-1"), durability="sync")
    assert final == {"decision": "reject", "acted": ["cordon:reject"]}


def test_list_is_newest_first_per_thread_and_honours_limit(
    saver: BaseCheckpointSaver[Any],
) -> None:
    for name in ("run-a", "run-b"):
        graph(saver).invoke({}, thread(name), durability="sync")
    graph(saver).invoke(Command(resume="approve"), thread("run-a"), durability="sync")
    listed = list(saver.list(thread("run-a")))
    assert len(listed) >= 3
    assert {t.config["configurable"]["thread_id"] for t in listed} == {"run-a"}
    steps = [t.metadata["step"] for t in listed if t.metadata is not None]
    assert steps == sorted(steps, reverse=True)
    ids = [t.config["configurable"]["checkpoint_id"] for t in listed]
    limited = saver.list(thread("run-a"), limit=2)
    assert [t.config["configurable"]["checkpoint_id"] for t in limited] == ids[:2]
    other = {t.config["configurable"]["thread_id"] for t in saver.list(thread("run-b"))}
    assert other == {"run-b"}


def test_get_tuple_returns_the_latest_or_the_named_checkpoint(
    saver: BaseCheckpointSaver[Any],
) -> None:
    assert saver.get_tuple(thread("never-ran")) is None
    graph(saver).invoke({}, thread("run-1"), durability="sync")
    waiting = saver.get_tuple(thread("run-1"))
    assert waiting is not None
    graph(saver).invoke(Command(resume="approve"), thread("run-1"), durability="sync")
    latest = saver.get_tuple(thread("run-1"))
    assert latest is not None
    assert latest.checkpoint["channel_values"]["acted"] == ["cordon:approve"]
    named = saver.get_tuple(waiting.config)
    assert named is not None
    assert named.checkpoint["id"] == waiting.checkpoint["id"] != latest.checkpoint["id"]
    assert "acted" not in named.checkpoint["channel_values"]


def test_a_thread_continued_after_reopening_keeps_its_state(reopen_saver: Opener) -> None:
    with reopen_saver() as saver:
        graph(saver).invoke({}, thread("run-1"), durability="sync")
        graph(saver).invoke(Command(resume="approve"), thread("run-1"), durability="sync")
    with reopen_saver() as saver:
        graph(saver).invoke({}, thread("run-1"), durability="sync")  # the next round
        final = graph(saver).invoke(Command(resume="reject"), thread("run-1"), durability="sync")
    with reopen_saver() as saver:
        stored = graph(saver).get_state(thread("run-1")).values
    assert final["acted"] == ["cordon:approve", "cordon:reject"]
    assert stored == {"decision": "reject", "acted": ["cordon:approve", "cordon:reject"]}

"""The savers hold a super-step's task writes, and a run's input checkpoint, until its next
checkpoint (storage/checkpointer_savers.py): what another process sees, and when.

Covers, on the SQLite file saver and on PostgreSQL, with a second saver on the same database
standing for another process: task writes, an input checkpoint and the one with the inputs
applied (step 0) are not on disk until the thread's next checkpoint, which brings them in the
same commit; a read of the thread in the holding saver (`get_tuple`, `list`), `flush` and
`close` put them on disk too; a held write is kept per thread (one thread's checkpoint does
not carry another's); `delete_thread` drops them. The checkpoint of a super-step that ran only
nodes named by `hold_after` waits for the thread's next one (not one that also ran another
node, nor once the engine names none), and so does one whose every task the engine's `quiet`
rule says did nothing (not one with a task that did something or ran no node). A commit
writes only the thread's newest checkpoint and the writes made from it: the held checkpoints it
supersedes, and the writes they applied, never reach disk, and the newest one still loads
every channel they made new (PostgreSQL stores a blob per channel version). A thread the engine
says is new (`new_thread`) answers its first read with None without a query, once, and not
after a write or outside the block. (That the
engine's graphs have no channel rebuilt from its ancestors' writes:
tests/engine/test_graph_channels.py.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, empty_checkpoint

from storage.checkpointer import make_checkpointer
from storage.checkpointer_savers import BufferedWrites, flush_writes, hold_after, new_thread

Opener = Callable[[], AbstractContextManager[BaseCheckpointSaver[Any]]]


@pytest.fixture(params=["sqlite-file", "postgres"])
def open_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    else:
        url = f"sqlite:///{tmp_path / 'oncall.db'}"
    return lambda: make_checkpointer(url)


@pytest.fixture
def savers(
    open_saver: Opener,
) -> Iterator[tuple[BaseCheckpointSaver[Any], BaseCheckpointSaver[Any]]]:
    """The saver under test and another on the same database (another process)."""
    with open_saver() as holding, open_saver() as other:
        assert isinstance(holding, BufferedWrites)
        yield holding, other


def config(thread: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put(
    saver: BaseCheckpointSaver[Any],
    thread: str,
    parent: str | None,
    source: Literal["input", "loop"],
    step: int,
    channels: dict[str, tuple[str, Any]] | None = None,
    new: tuple[str, ...] = (),
) -> str:
    """Put a checkpoint of `channels` (name -> (version, value)), `new` the channels whose
    versions it made new."""
    checkpoint: Checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"step": step} | {k: v for k, (_, v) in (channels or {}).items()}
    checkpoint["channel_versions"] = {k: ver for k, (ver, _) in (channels or {}).items()}
    versions = {k: checkpoint["channel_versions"][k] for k in new}
    metadata: Any = {"source": source, "step": step, "parents": {}}
    saved = saver.put(config(thread, parent), checkpoint, metadata, versions)
    assert saved["configurable"]["checkpoint_id"] == checkpoint["id"]
    return checkpoint["id"]


def writes_seen(saver: BaseCheckpointSaver[Any], thread: str, checkpoint_id: str) -> list[Any]:
    found = saver.get_tuple(config(thread, checkpoint_id))
    return [] if found is None else sorted(w[2] for w in found.pending_writes or [])


def test_task_writes_and_the_input_checkpoint_reach_disk_with_the_next_checkpoint(
    savers: tuple[BaseCheckpointSaver[Any], BaseCheckpointSaver[Any]],
) -> None:
    holding, other = savers
    first = put(holding, "run-1", None, "input", -1)
    holding.put_writes(config("run-1", first), [("a", 1)], "task-a")
    holding.put_writes(config("run-1", first), [("b", 2)], "task-b")
    assert other.get_tuple(config("run-1")) is None  # the input checkpoint is held too
    applied = put(holding, "run-1", first, "loop", 0)
    assert other.get_tuple(config("run-1")) is None  # and the one with its inputs applied
    holding.put_writes(config("run-1", applied), [("a", 4)], "task-a")
    second = put(holding, "run-1", applied, "loop", 1)
    latest = other.get_tuple(config("run-1"))  # committed with the next one, which supersedes
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == second
    for superseded in (first, applied):  # never on disk
        assert other.get_tuple(config("run-1", superseded)) is None
    holding.put_writes(config("run-1", second), [("c", 3)], "task-c")
    assert writes_seen(other, "run-1", second) == []
    assert writes_seen(holding, "run-1", second) == [3]  # a read of the thread commits them
    assert writes_seen(other, "run-1", second) == [3]


def test_flush_and_close_put_what_is_held_on_disk_per_thread(open_saver: Opener) -> None:
    with open_saver() as other:
        with open_saver() as holding:
            one = put(holding, "run-1", None, "loop", 0)
            two = put(holding, "run-2", None, "loop", 0)
            holding.put_writes(config("run-1", one), [("a", 1)], "task-a")
            holding.put_writes(config("run-2", two), [("b", 2)], "task-b")
            assert other.get_tuple(config("run-2")) is None
            newest = put(holding, "run-2", two, "loop", 1)  # commits run-2's held, not run-1's
            assert writes_seen(other, "run-1", one) == []
            found = other.get_tuple(config("run-2"))  # its newest: `two` and its write superseded
            assert found is not None and found.config["configurable"]["checkpoint_id"] == newest
            assert other.get_tuple(config("run-2", two)) is None
            flush_writes(holding, "run-1")
            assert writes_seen(other, "run-1", one) == [1]
            holding.put_writes(config("run-1", one), [("c", 3)], "task-c")
            holding.put_writes(config("run-2", two), [("d", 4)], "task-d")
            holding.delete_thread("run-2")
        assert writes_seen(other, "run-1", one) == [1, 3]  # closing flushed it
        assert other.get_tuple(config("run-2")) is None


def pull(node: str) -> str:
    """A task's path as LangGraph passes it for a node's task."""
    return f"~__pregel_pull, {node}"


def test_a_super_step_of_named_nodes_waits_for_the_next_checkpoint(
    savers: tuple[BaseCheckpointSaver[Any], BaseCheckpointSaver[Any]],
) -> None:
    holding, other = savers
    hold_after(holding, "run-1", {"stage-1"})
    applied = put(holding, "run-1", None, "loop", 0)
    holding.put_writes(config("run-1", applied), [("reads", 1)], "task-a", pull("stage-1"))
    gathered = put(holding, "run-1", applied, "loop", 1)
    assert other.get_tuple(config("run-1")) is None  # the reads' checkpoint is held
    holding.put_writes(config("run-1", gathered), [("checks", 2)], "task-b", pull("stage-2"))
    checked = put(holding, "run-1", gathered, "loop", 2)
    latest = other.get_tuple(config("run-1"))  # committed with the next one
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == checked
    assert other.get_tuple(config("run-1", gathered)) is None  # superseded by it
    # a super-step that also ran another node is not held
    holding.put_writes(config("run-1", checked), [("reads", 3)], "task-c", pull("stage-1"))
    holding.put_writes(config("run-1", checked), [("fix", 4)], "task-d", pull("fix"))
    mixed = put(holding, "run-1", checked, "loop", 3)
    found = other.get_tuple(config("run-1"))
    assert found is not None and found.config["configurable"]["checkpoint_id"] == mixed
    # once the engine names none (its stream ended), nothing is held
    hold_after(holding, "run-1", ())
    holding.put_writes(config("run-1", mixed), [("reads", 5)], "task-e", pull("stage-1"))
    last = put(holding, "run-1", mixed, "loop", 4)
    found = other.get_tuple(config("run-1"))
    assert found is not None and found.config["configurable"]["checkpoint_id"] == last


def test_the_newest_checkpoint_loads_what_the_superseded_ones_made_new(
    savers: tuple[BaseCheckpointSaver[Any], BaseCheckpointSaver[Any]],
) -> None:
    """Channel values that are not primitives are blobs on PostgreSQL, one per version, written
    for the versions a checkpoint made new: the superseded checkpoints' versions must be written
    with the newest, or it would name versions no row holds."""
    holding, other = savers
    hold_after(holding, "run-1", {"stage-1"})
    reads = {"summary": [1, 2, 3]}
    applied = put(holding, "run-1", None, "loop", 0, {"inputs": ("1", {"node": "n1"})}, ("inputs",))
    holding.put_writes(config("run-1", applied), [("steps", reads)], "task-a", pull("stage-1"))
    gathered = put(
        holding, "run-1", applied, "loop", 1,
        {"inputs": ("1", {"node": "n1"}), "steps": ("2", reads)}, ("steps",),
    )  # fmt: skip
    holding.put_writes(config("run-1", gathered), [("checks", 2)], "task-b", pull("stage-2"))
    checked = {"summary": [1, 2, 3], "check": "fired"}
    newest = put(
        holding, "run-1", gathered, "loop", 2,
        {"inputs": ("1", {"node": "n1"}), "steps": ("3", checked), "verdict": ("3", ["n1"])},
        ("steps", "verdict"),
    )  # fmt: skip
    holding.put_writes(config("run-1", newest), [("x", 1)], "task-c", pull("fix"))
    latest = other.get_tuple(config("run-1"))
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == newest
    assert other.get_tuple(config("run-1", gathered)) is None  # superseded
    values = latest.checkpoint["channel_values"]
    assert values["inputs"] == {"node": "n1"}  # made new by a superseded checkpoint only
    assert values["steps"] == checked and values["verdict"] == ["n1"]
    flush_writes(holding, "run-1")  # writes made from the newest are kept
    assert writes_seen(other, "run-1", newest) == [1]


def test_a_super_step_of_quiet_tasks_waits_for_the_next_checkpoint(
    savers: tuple[BaseCheckpointSaver[Any], BaseCheckpointSaver[Any]],
) -> None:
    """The engine's `quiet` rule (bot/engine/idle_steps.py) judges each task by its node and
    writes: a super-step waits only when every one of its tasks is quiet."""
    holding, other = savers

    def quiet(node: str | None, writes: Any) -> bool:
        return node is not None and all(channel == "idle" for channel, _ in writes)

    hold_after(holding, "run-1", (), quiet=quiet)
    applied = put(holding, "run-1", None, "loop", 0)
    holding.put_writes(config("run-1", applied), [("idle", 1)], "task-a", pull("fix"))
    holding.put_writes(config("run-1", applied), [("idle", 2)], "task-b", pull("confirm"))
    idle = put(holding, "run-1", applied, "loop", 1)
    assert other.get_tuple(config("run-1")) is None  # every task quiet: held
    holding.put_writes(config("run-1", idle), [("idle", 3)], "task-c", pull("fix"))
    holding.put_writes(config("run-1", idle), [("acted", 4)], "task-d", pull("execute"))
    acted = put(holding, "run-1", idle, "loop", 2)
    latest = other.get_tuple(config("run-1"))  # one task was not: committed, with what it held
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == acted
    assert other.get_tuple(config("run-1", idle)) is None  # superseded, never on disk
    holding.put_writes(config("run-1", acted), [("idle", 5)], "task-e", "")
    pushed = put(holding, "run-1", acted, "loop", 3)  # a task of no node is never quiet
    latest = other.get_tuple(config("run-1"))
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == pushed
    hold_after(holding, "run-1", ())  # the stream ended: nothing is held again
    holding.put_writes(config("run-1", pushed), [("idle", 6)], "task-f", pull("fix"))
    last = put(holding, "run-1", pushed, "loop", 4)
    latest = other.get_tuple(config("run-1"))
    assert latest is not None and latest.config["configurable"]["checkpoint_id"] == last


def test_a_new_thread_answers_its_first_read_without_a_query_once(
    savers: tuple[BaseCheckpointSaver[Any], BaseCheckpointSaver[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holding, other = savers
    queried: list[str] = []
    base = type(holding).__mro__[type(holding).__mro__.index(BufferedWrites) + 1]
    real = base.get_tuple

    def counted(self: Any, cfg: RunnableConfig) -> Any:
        queried.append(str(cfg["configurable"]["thread_id"]))
        return real(self, cfg)

    monkeypatch.setattr(base, "get_tuple", counted)
    with new_thread(holding, "run-1"), new_thread(holding, "run-2"):
        assert holding.get_tuple(config("run-1")) is None and queried == []
        assert holding.get_tuple(config("run-1")) is None and queried == ["run-1"]  # once
        put(holding, "run-2", None, "loop", 1)  # a write ends it: the read finds the write
        found = holding.get_tuple(config("run-2"))
        assert found is not None and queried == ["run-1", "run-2"]
        put(other, "run-3", None, "loop", 1)  # not new: read as always
        assert holding.get_tuple(config("run-3")) is not None and queried[-1] == "run-3"
    with new_thread(holding, "run-4"):
        pass
    assert holding.get_tuple(config("run-4")) is None and queried[-1] == "run-4"  # block left

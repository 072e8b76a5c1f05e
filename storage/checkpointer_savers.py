"""Checkpoint savers without a process-wide lock, that commit a super-step once (issue 21).

LangGraph's `SqliteSaver` shares one connection and `PostgresSaver` one lock between every run
of the process, and both commit each task's writes (`put_writes`) on their own as the task ends:
a triage of five super-steps made 23 commits, the nine gather writes racing each other and the
checkpoint for the file's one write lock (SQLite's busy handler sleeps between tries). Here:
- `BufferedWrites` keeps a thread's task writes in memory and commits them in the transaction of
  its next checkpoint (`put`): one commit per super-step. A read of the thread (`get_tuple`,
  `list`), `flush(thread_id)` (the engine's, when a stream stops: an interrupt's writes are on
  disk before the approval is recorded) and `close()` commit them too, so every reader sees them.
  What a crash may lose: the writes of the super-step in progress, so its finished tasks run
  again on takeover (reads; actions are idempotent behind the ledger). docs/operations.md.
  A commit writes only what the thread's newest checkpoint in it needs (`_needed`): that
  checkpoint and the task writes made from it. The held checkpoints before it and the writes
  they applied are superseded: a run resumes from its newest checkpoint and that checkpoint's
  writes, and nothing here reads a thread's history. A 4,096-member storm's run wrote its
  2.8 MB of summaries five times (four checkpoints and the gathers' writes), now twice.
- `ConcurrentSqliteSaver` gives each thread its own connection to the checkpoint file (WAL:
  readers never wait) and queues this process's commits on the file's turns
  (storage/write_turns.py), so they follow each other at once instead of polling SQLite's lock
  (other processes still wait up to `BUSY_TIMEOUT_S`);
- `PooledPostgresSaver` takes a pooled connection per call and no lock (a pooled connection is
  used by one thread at a time by construction).
Only storage/checkpointer.py builds them.
"""

from __future__ import annotations

import builtins
import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from storage import write_turns

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0
"""How long a checkpoint write waits for another process's commit to the same file."""

QuietTask = Callable[[str | None, Sequence[tuple[str, Any]]], bool]
"""Whether a task (its node, its writes) may have its super-step's checkpoint wait for the
thread's next one: the engine's rule (`hold_after(..., quiet=)`, bot/engine/idle_steps.py: a
verdict of no fault, remediation steps that did nothing); the saver knows nothing of what
writes mean."""


@dataclass(frozen=True)
class _Held:
    """One buffered call: task writes (`put_writes`), or an input checkpoint (`put`)."""

    config: RunnableConfig
    writes: builtins.list[tuple[str, Any]] = field(default_factory=builtins.list)
    task_id: str = ""
    task_path: str = ""
    checkpoint: Checkpoint | None = None
    metadata: CheckpointMetadata | None = None
    new_versions: ChannelVersions | None = None


class BufferedWrites(BaseCheckpointSaver[Any]):
    """Task writes held per thread until that thread's next checkpoint, read or flush.

    A run's input checkpoint (`source: input`: the inputs, before any task ran), and the one
    after LangGraph applied them (`loop`, step 0), are held the same way and committed with the
    checkpoint of its first super-step: a crash before that one leaves no checkpoint, and the
    run starts again from its inputs (its work row has them). So is the checkpoint of a
    super-step that ran only nodes the engine named for its thread (`hold_after`: reads whose
    timeline records wait for the checks and the verdict that follow them), or tasks the
    engine's `quiet` rule lets wait (a verdict of no fault, remediation steps that did nothing),
    until the thread's next one. A commit writes only the newest checkpoint among them and the
    writes made from it (`_needed`): the next one supersedes what it holds.

    Put first in the bases (`class S(BufferedWrites, SqliteSaver)`): `super()` is the saver that
    writes; the subclass says how one transaction spans several of its calls (`_transaction`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._buffered: dict[str, builtins.list[_Held]] = {}
        self._holdable: dict[str, frozenset[str]] = {}  # thread -> nodes (`hold_after`)
        self._quiet: dict[str, QuietTask] = {}  # thread -> its rule (`hold_after`)
        self._new: dict[str, None] = {}  # threads with no checkpoint anywhere (`new_thread`)
        self._buffer_lock = threading.Lock()

    @contextmanager
    def new_thread(self, thread_id: str) -> Iterator[None]:
        """Inside: `thread_id` has no checkpoint anywhere (the engine's run was recorded just
        now, in a transaction this process committed, and no process has driven it): its
        first `get_tuple` (LangGraph's, as the graph starts) answers None without a query.
        Any write to the thread, that read, or leaving the block ends it: a retry, a resumed
        run and every other reader read the database."""
        with self._buffer_lock:
            self._new[thread_id] = None
        try:
            yield
        finally:
            with self._buffer_lock:
                self._new.pop(thread_id, None)

    def hold_after(
        self, thread_id: str, nodes: Collection[str], *, quiet: QuietTask | None = None
    ) -> None:
        """Hold the checkpoint of a super-step of `thread_id` whose every task ran one of
        `nodes`, or may wait by the `quiet` rule, with the thread's next checkpoint, as an
        input checkpoint is held; neither: hold none again (the engine says so when the
        thread's stream ends)."""
        with self._buffer_lock:
            if nodes or quiet is not None:
                self._holdable[thread_id] = frozenset(nodes)
            else:
                self._holdable.pop(thread_id, None)
            if quiet is not None:
                self._quiet[thread_id] = quiet
            else:
                self._quiet.pop(thread_id, None)

    def _holds(self, thread_id: str) -> bool:
        """Whether the super-step now checkpointed may wait: the task writes held since the
        thread's last held checkpoint each ran a node named by `hold_after` or were quiet."""
        with self._buffer_lock:
            holdable = self._holdable.get(thread_id)
            if holdable is None:
                return False
            quiet = self._quiet.get(thread_id)
            tasks: list[_Held] = []
            for held in reversed(self._buffered.get(thread_id, [])):
                if held.checkpoint is not None:
                    break
                tasks.append(held)
        return bool(tasks) and all(
            _node_of(t.task_path) in holdable
            or (quiet is not None and quiet(_node_of(t.task_path), t.writes))
            for t in tasks
        )

    def _hold(self, held: _Held) -> None:
        thread_id = str(held.config["configurable"]["thread_id"])
        with self._buffer_lock:
            self._new.pop(thread_id, None)
            self._buffered.setdefault(thread_id, []).append(held)

    def _take(self, thread_id: str | None) -> builtins.list[_Held]:
        with self._buffer_lock:
            if thread_id is None:
                taken = [h for held in self._buffered.values() for h in held]
                self._buffered.clear()
                return taken
            return self._buffered.pop(thread_id, [])

    def _transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _write(self, pending: Sequence[_Held]) -> None:
        for held in _needed(pending):
            if held.checkpoint is not None and held.metadata is not None:
                super().put(held.config, held.checkpoint, held.metadata, held.new_versions or {})
            else:
                super().put_writes(held.config, held.writes, held.task_id, held.task_path)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._hold(_Held(config, list(writes), task_id, task_path))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        held = _Held(config, checkpoint=checkpoint, metadata=metadata, new_versions=new_versions)
        with self._buffer_lock:
            self._new.pop(thread_id, None)
        if _before_any_step(metadata) or self._holds(thread_id):
            self._hold(held)
        else:
            pending = [*self._take(thread_id), held]
            with self._transaction():
                self._write(pending)
        return {  # what the savers' own `put` returns
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def flush(self, thread_id: str | None = None) -> None:
        """Commit what is held for `thread_id` (for every thread when None) in one transaction.
        Taken from the buffer first: a failed commit loses it, as a crash would."""
        pending = self._take(thread_id)
        if pending:
            with self._transaction():
                self._write(pending)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id = str(config["configurable"]["thread_id"])
        with self._buffer_lock:
            new = self._new.pop(thread_id, 0) is None
        if new:
            return None
        self.flush(thread_id)
        return super().get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self.flush(str(config["configurable"]["thread_id"]) if config else None)
        return super().list(config, filter=filter, before=before, limit=limit)

    def delete_thread(self, thread_id: str) -> None:
        self.hold_after(str(thread_id), ())
        self._take(str(thread_id))
        super().delete_thread(thread_id)


def _needed(pending: Sequence[_Held]) -> builtins.list[_Held]:
    """The calls of `pending` (in order) that each thread's newest checkpoint among them needs:
    that checkpoint, and the task writes held after it (made from it: LangGraph puts a
    super-step's task writes before the checkpoint that applies them). A thread with no
    checkpoint among them keeps all its writes (made from its checkpoint on disk).

    The newest checkpoint is written with the channel versions every superseded one made new
    too (each at its version in the newest): PostgreSQL's saver stores a blob per channel
    version, for the versions a checkpoint made new, and the newest one names them all. Its
    values are the newest's own: a channel not written since keeps its value and its version.
    The engine's graphs have no `DeltaChannel` (a value rebuilt from its ancestors' writes,
    which are not kept): tests/engine/test_graph_channels.py checks that."""
    newest: dict[tuple[str, str], int] = {}  # (thread, namespace) -> its newest checkpoint
    made_new: dict[tuple[str, str], set[str]] = {}  # -> channels its checkpoints made new
    threads = [_thread(held) for held in pending]
    for index, held in enumerate(pending):
        if held.checkpoint is not None:
            newest[threads[index]] = index
            made_new.setdefault(threads[index], set()).update(held.new_versions or {})
    needed: builtins.list[_Held] = []
    for index, held in enumerate(pending):
        last = newest.get(threads[index])
        if last is None or index > last:
            needed.append(held)
        elif index == last and held.checkpoint is not None:
            versions = held.checkpoint["channel_versions"]
            new = {ch: versions[ch] for ch in made_new[threads[index]] if ch in versions}
            needed.append(replace(held, new_versions=new))
    return needed


def _thread(held: _Held) -> tuple[str, str]:
    configurable = held.config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _before_any_step(metadata: CheckpointMetadata) -> bool:
    """A run's input checkpoint (step -1) or the one with its inputs applied (step 0): no
    step has run yet, so either can be held with the first super-step's checkpoint (a crash
    before that one starts the run again from its inputs, as one before its input would)."""
    source, step = metadata.get("source"), metadata.get("step")
    return source == "input" or (source == "loop" and step == 0)


def _node_of(task_path: str) -> str | None:
    """The node a task ran, from its path as LangGraph passes it (`~__pregel_pull, <node>`);
    None for any other task (a push, an input): such a super-step is never held."""
    prefix = "~__pregel_pull, "
    if not task_path.startswith(prefix):
        return None
    node, _, _ = task_path[len(prefix) :].partition(", ")
    return node or None


def hold_after(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    nodes: Collection[str],
    *,
    quiet: QuietTask | None = None,
) -> None:
    """Name the nodes whose super-steps' checkpoints `saver` may hold for `thread_id`, and the
    rule for tasks that did nothing (a no-op for savers that hold nothing)."""
    if isinstance(saver, BufferedWrites):
        saver.hold_after(thread_id, nodes, quiet=quiet)


def new_thread(saver: BaseCheckpointSaver[Any], thread_id: str) -> AbstractContextManager[None]:
    """`saver.new_thread` (a thread with no checkpoint anywhere: no read as its graph starts);
    for savers that know no such thing, nothing."""
    if isinstance(saver, BufferedWrites):
        return saver.new_thread(thread_id)
    return nullcontext()


def flush_writes(saver: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """Commit the writes `saver` holds for `thread_id` (a no-op for savers that hold none)."""
    if isinstance(saver, BufferedWrites):
        saver.flush(thread_id)


class ConcurrentSqliteSaver(BufferedWrites, SqliteSaver):
    """A SqliteSaver with one connection per thread instead of one shared under a lock, its
    commits queued on the file's turns in this process (reads never take them)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        self._opened: builtins.list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()  # guards the list of connections, not the I/O
        super().__init__(self._connection())

    def _connection(self) -> write_turns.TurnTakingConnection:
        conn: write_turns.TurnTakingConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = write_turns.connect(self._path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            self._local.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction on this thread's connection for every `cursor()` inside it."""
        if getattr(self._local, "open", False):
            yield
            return
        self.setup()
        conn = self._connection()
        conn.take_turn()  # after this process's other writers of the file; commit gives it back
        self._local.open = True
        try:
            yield
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            self._local.open = False

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """This thread's connection; with `transaction`, commit on success, roll back on error
        (inside `_transaction`, its commit)."""
        self.setup()
        conn = self._connection()
        if not transaction:
            cur = conn.cursor()
            try:
                yield cur
            finally:
                cur.close()
            return
        with self._transaction():
            cur = conn.cursor()
            try:
                yield cur
            finally:
                cur.close()

    def close(self) -> None:
        try:
            self.flush()
        except sqlite3.Error:
            logger.warning("checkpoint writes not saved at close", exc_info=True)
        with self._opened_lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()


def pooled_postgres_saver(pool: Any) -> Any:
    """A PostgresSaver over `pool` whose calls each take their own pooled connection, with no
    process-wide lock (the module is optional: imported only for a PostgreSQL URL)."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    class PooledPostgresSaver(BufferedWrites, PostgresSaver):
        _held = threading.local()

        @contextmanager
        def _transaction(self) -> Iterator[None]:
            """One pooled connection in one transaction for every `_cursor()` inside it."""
            if getattr(self._held, "conn", None) is not None:
                yield
                return
            pool: Any = self.conn  # a ConnectionPool (storage/checkpointer.py)
            with pool.connection() as conn, conn.transaction():
                self._held.conn = conn
                try:
                    yield
                finally:
                    self._held.conn = None

        @contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            held = getattr(self._held, "conn", None)
            if held is not None and pipeline and self.supports_pipeline:
                with held.pipeline(), held.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
                return
            if held is not None:
                with held.cursor(binary=True, row_factory=dict_row) as cur:
                    yield cur
                return
            pool: Any = self.conn
            with pool.connection() as conn:
                if pipeline and self.supports_pipeline:
                    with conn.pipeline(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur
                elif pipeline:
                    with conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur
                else:
                    with conn.cursor(binary=True, row_factory=dict_row) as cur:
                        yield cur

        def close(self) -> None:
            self.flush()

    return PooledPostgresSaver(pool)

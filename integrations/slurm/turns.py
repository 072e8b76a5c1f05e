"""Turns to read a node: two REST reads of the same node must never overlap.

slurmctld 22.05.8 crashes ("double free or corruption" as the thread that answered exits,
SIGABRT or SIGSEGV) when two `GET node/N` through slurmrestd overlap: two threads reading one
node brought it down within 1-6 s in each of four tries, while one thread (29,000 reads a
minute) or two threads reading two different nodes (35,000) did no harm (docs/slurm.md, "Reads
of one node take turns"). The bot reads a node from several threads at once (a stage's steps,
the evidence snapshot, a remediation's checks), and from several processes (replicas, a CLI
`approve` that acts while `serve` runs).

`NodeTurns.reading(node)` holds the node's turn: a thread lock per slot within the process and,
with a turns file (`slurm.turns_file`), a POSIX record lock on the slot's byte of that file,
which every bot process of the host that names the same file honours. A node's slot is a hash of
the slurmrestd URL and its name among SLOTS: two nodes that share a slot take turns too, which
costs nothing but a little parallelism. Record locks belong to the process, not the thread, so
one file descriptor stays open for the process's life and the thread lock of a slot is taken
first: no two threads of a process ever hold one slot's record lock together.
"""

from __future__ import annotations

import fcntl
import os
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SLOTS = 1 << 16
"""Distinct turns (bytes of the turns file): nodes whose slots collide take turns together."""

_THREAD_TURNS: dict[int, threading.Lock] = {}
_FILES: dict[Path, int] = {}  # turns file -> the descriptor this process keeps open on it
_GUARD = threading.Lock()


class NodeTurns:
    """Turns to read nodes through the slurmrestd at `url`, within this process and, with
    `path`, with every process that locks the same file."""

    def __init__(self, url: str, *, path: Path | None = None) -> None:
        self.url, self.path = url, path

    def slot(self, node: str) -> int:
        return zlib.crc32(f"{self.url} {node}".encode()) % SLOTS

    @contextmanager
    def reading(self, node: str) -> Iterator[None]:
        """Hold `node`'s turn for the block."""
        slot = self.slot(node)
        with _GUARD:
            turn = _THREAD_TURNS.setdefault(slot, threading.Lock())
        with turn:
            fd = _descriptor(self.path) if self.path is not None else None
            if fd is None:
                yield
                return
            fcntl.lockf(fd, fcntl.LOCK_EX, 1, slot)
            try:
                yield
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, slot)


def _descriptor(path: Path) -> int:
    """This process's descriptor on the turns file, opened (and created, mode 0660) once."""
    with _GUARD:
        fd = _FILES.get(path)
        if fd is None:
            fd = _FILES[path] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o660)
        return fd


def check_turns_file(path: Path) -> str:
    """Open the turns file as `reading` will; "" when it can, else why not (for start-up and
    `cluster check`: a bot that cannot take turns with the others must say so, not crash
    slurmctld later)."""
    try:
        _descriptor(path)
    except OSError as exc:
        return f"cannot open slurm.turns_file {path}: {exc.strerror or exc}"
    return ""

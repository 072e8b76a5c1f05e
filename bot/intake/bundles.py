"""Reading evidence bundles: a directory, a tarball (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz,
.tar.zst) or a single file of tool outputs and logs, `.gz` members (an
`nvidia-bug-report.log.gz`) decompressed in memory. A tarball inside a directory (a file shared
in Slack) is read as a tarball.

Nothing is extracted to disk. One `Budget` per bundle keeps a hostile or huge one harmless:
every decompressed byte counts (skipped, binary and directory entries included), and so does
every tar entry and the CPU time spent; past any of them reading stops with a note. Texts kept
are further capped per member and in total. Links, devices, absolute names and names with `..`
are skipped and noted, never followed. Binary members (a NUL byte in the first 8 KiB) are
skipped. A missing path or an unreadable archive raises UserInputError (one line).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import tarfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

import zstandard

from bot.errors import UserInputError
from bot.limits import BUNDLE_CPU_SECONDS, BUNDLE_MAX_ENTRIES

MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 2_000
MAX_DECOMPRESSED_BYTES = 1024 * 1024 * 1024
"""Bytes a bundle may decompress in all (what is kept is capped by MAX_TOTAL_BYTES)."""
_SNIFF = 8192
_CHUNK = 1024 * 1024
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")


class BudgetSpent(Exception):  # noqa: N818  (a state, like TelemetryUnavailable)
    """The bundle's budget ran out; the message says which part, for the bundle's notes."""


@dataclass
class Budget:
    """What one bundle may cost: decompressed bytes, tar entries and CPU seconds (the reading
    thread's own CPU time, so other threads' work does not count against it)."""

    max_bytes: int = MAX_DECOMPRESSED_BYTES
    max_entries: int = BUNDLE_MAX_ENTRIES
    cpu_seconds: float = BUNDLE_CPU_SECONDS
    cpu: Callable[[], float] = time.thread_time
    spent_bytes: int = 0
    entries: int = 0
    _started: float | None = None

    def spend(self, count: int) -> None:
        """Count `count` decompressed bytes; raise BudgetSpent past a limit."""
        self.spent_bytes += count
        if self.spent_bytes > self.max_bytes:
            raise BudgetSpent(f"stopped after {self.max_bytes} decompressed bytes (bundle budget)")
        self.check_time()

    def entry(self) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise BudgetSpent(f"stopped after {self.max_entries} archive entries (bundle budget)")

    def check_time(self) -> None:
        now = self.cpu()
        if self._started is None:
            self._started = now
        elif now - self._started > self.cpu_seconds:
            raise BudgetSpent(f"stopped after {self.cpu_seconds:g} s of CPU time (bundle budget)")


@dataclass
class Bundle:
    """The texts read (name inside the bundle, text) and what was skipped or cut, and why."""

    texts: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    total: int = 0


def read_bundle(
    path: Path,
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_members: int = MAX_MEMBERS,
    budget: Budget | None = None,
) -> Bundle:
    """Read every text member of the bundle at `path` within the limits and the budget."""
    limits = _Limits(max_member_bytes, max_total_bytes, max_members)
    reader = _Reader(limits, budget or Budget())
    if path.is_dir():
        members: Iterator[tuple[str, Opener | None]] = _directory(path, reader.budget)
    elif path.is_file() and _is_tarball(path.name):
        members = _tarball(path, reader.budget)
    elif path.is_file():
        members = iter([(path.name, _file_opener(path))])
    else:
        raise UserInputError(f"cannot read bundle '{path}': no such file or directory")
    try:
        reader.read(members)
    except BudgetSpent as spent:
        reader.bundle.notes.append(str(spent))
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zstandard.ZstdError) as exc:
        raise UserInputError(f"cannot read bundle '{path}': {_reason(exc)}") from exc
    return reader.bundle


@dataclass(frozen=True)
class _Limits:
    member: int
    total: int
    members: int


#: Opens one member's bytes lazily (a file on disk or a member of an open tarball).
Opener = Callable[[], IO[bytes] | None]


@dataclass
class _Reader:
    limits: _Limits
    budget: Budget
    bundle: Bundle = field(default_factory=Bundle)
    count: int = 0

    def read(self, members: Iterator[tuple[str, Opener | None]]) -> None:
        notes, limits = self.bundle.notes, self.limits
        for name, opener in members:
            if self.count >= limits.members:
                notes.append(f"stopped after {limits.members} members (MAX_MEMBERS)")
                return
            self.count += 1
            if opener is None:
                notes.append(f"{name}: skipped (not a regular file, or unsafe name)")
                continue
            self.add(name, opener)
            if self.bundle.total >= limits.total:
                notes.append(f"stopped at {limits.total} bytes read (MAX_TOTAL_BYTES)")
                return

    def add(self, name: str, opener: Opener) -> None:
        bundle, limits = self.bundle, self.limits
        room = min(limits.member, limits.total - bundle.total)
        stream = opener()
        if stream is None:
            bundle.notes.append(f"{name}: skipped (no data)")
            return
        with stream:
            raw = _read_counted(stream, room + 1, self.budget)
        if name.lower().endswith(".gz") and not _is_tarball(name):
            try:
                raw = _gunzip(raw[:room], room + 1, self.budget)
            except zlib.error:
                bundle.notes.append(f"{name}: skipped (not valid gzip data)")
                return
            name = name[:-3]
        if b"\0" in raw[:_SNIFF]:
            bundle.notes.append(f"{name}: skipped (binary)")
            return
        if len(raw) > room:
            bundle.notes.append(f"{name}: truncated to its first {room} bytes (MAX_MEMBER_BYTES)")
            raw = raw[:room]
        bundle.total += len(raw)
        bundle.texts.append((name, raw.decode("utf-8", errors="replace")))


def _read_counted(stream: IO[bytes], size: int, budget: Budget) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        chunk = stream.read(min(_CHUNK, left))
        if not chunk:
            break
        budget.check_time()
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _gunzip(raw: bytes, size: int, budget: Budget) -> bytes:
    """At most `size` bytes of gzip data decompressed: a gzip bomb costs no more than a file."""
    inflater = zlib.decompressobj(wbits=31)
    parts: list[bytes] = []
    got, data = 0, raw
    while got < size and data:
        chunk = inflater.decompress(data, min(_CHUNK, size - got))
        budget.spend(len(chunk))
        parts.append(chunk)
        got += len(chunk)
        data = inflater.unconsumed_tail
        if not chunk:
            break
    return b"".join(parts)


def _is_tarball(name: str) -> bool:
    return name.lower().endswith(_TAR_SUFFIXES)


def _file_opener(path: Path) -> Opener:
    return lambda: path.open("rb")


def _directory(root: Path, budget: Budget) -> Iterator[tuple[str, Opener | None]]:
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            budget.entry()
            full = Path(folder) / name
            rel = full.relative_to(root).as_posix()
            regular = full.is_file() and not full.is_symlink()
            if regular and _is_tarball(name):
                for inner, opener in _tarball(full, budget):
                    yield f"{rel}/{inner}", opener
                continue
            yield rel, (_file_opener(full) if regular else None)


class _Counted:
    """A decompressing file object whose every byte out is charged to the budget."""

    def __init__(self, inner: Any, budget: Budget) -> None:
        self.inner, self.budget = inner, budget

    def read(self, size: int = -1) -> bytes:
        data: bytes = self.inner.read(size if size >= 0 else _CHUNK)
        self.budget.spend(len(data))
        return data

    def close(self) -> None:
        self.inner.close()


def _decompressing(raw: IO[bytes]) -> Any:
    """The raw file, or a stream decompressing it, chosen by its magic bytes."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    if magic.startswith(b"\x28\xb5\x2f\xfd"):
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return raw


def _tarball(path: Path, budget: Budget) -> Iterator[tuple[str, Opener | None]]:
    """Members of the tarball at `path`, read as a stream (`r|`): one pass, so nothing is
    decompressed twice and skipping a member still costs its bytes."""
    with path.open("rb") as raw:
        stream = _Counted(_decompressing(raw), budget)
        try:
            with tarfile.open(fileobj=stream, mode="r|") as archive:  # type: ignore[call-overload]
                for member in archive:
                    budget.entry()
                    archive.members = []  # stream mode: keep no list of every entry seen
                    if member.isdir():
                        continue
                    if not member.isfile() or not _safe_name(member.name):
                        yield member.name, None
                        continue
                    yield member.name, _member_opener(archive, member)
        finally:
            stream.close()


def _member_opener(archive: tarfile.TarFile, member: tarfile.TarInfo) -> Opener:
    return lambda: archive.extractfile(member)


def _safe_name(name: str) -> bool:
    pure = PurePosixPath(name)
    return not pure.is_absolute() and ".." not in pure.parts and "\\" not in name


def _reason(exc: BaseException) -> str:
    """One line: tarfile's ReadError lists every compression it tried, one per line."""
    if isinstance(exc, tarfile.ReadError | EOFError | lzma.LZMAError | zstandard.ZstdError):
        return "not a readable tar archive (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz, .tar.zst)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

"""Reading evidence bundles: a directory, a tarball (.tar, .tar.gz, .tgz) or a single file of
tool outputs and logs, `.gz` members (an `nvidia-bug-report.log.gz`) decompressed in memory.

Nothing is extracted to disk. Limits keep a hostile or huge bundle harmless: members are read at
most MAX_MEMBER_BYTES (decompressed; larger ones are truncated and noted), at most
MAX_TOTAL_BYTES over the bundle and MAX_MEMBERS members; links, devices, absolute names and
names with `..` are skipped and noted, never followed. Binary members (a NUL byte in the first
8 KiB) are skipped. A missing path or an unreadable archive raises UserInputError (one line).
"""

from __future__ import annotations

import os
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from bot.errors import UserInputError

MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 2_000
_SNIFF = 8192
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")


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
) -> Bundle:
    """Read every text member of the bundle at `path` within the limits."""
    limits = _Limits(max_member_bytes, max_total_bytes, max_members)
    bundle = Bundle()
    if path.is_dir():
        members: Iterator[tuple[str, Opener | None]] = _directory(path)
    elif path.is_file() and path.name.lower().endswith(_TAR_SUFFIXES):
        members = _tarball(path)
    elif path.is_file():
        members = iter([(path.name, _file_opener(path))])
    else:
        raise UserInputError(f"cannot read bundle '{path}': no such file or directory")
    try:
        for count, (name, opener) in enumerate(members):
            if count >= limits.members:
                bundle.notes.append(f"stopped after {limits.members} members (MAX_MEMBERS)")
                break
            if opener is None:
                bundle.notes.append(f"{name}: skipped (not a regular file, or unsafe name)")
                continue
            _add(bundle, name, opener, limits)
            if bundle.total >= limits.total:
                bundle.notes.append(f"stopped at {limits.total} bytes read (MAX_TOTAL_BYTES)")
                break
    except (tarfile.TarError, OSError) as exc:
        raise UserInputError(f"cannot read bundle '{path}': {_reason(exc)}") from exc
    return bundle


@dataclass(frozen=True)
class _Limits:
    member: int
    total: int
    members: int


#: Opens one member's bytes lazily (a file on disk or a member of an open tarball).
Opener = Callable[[], IO[bytes] | None]


def _file_opener(path: Path) -> Opener:
    return lambda: path.open("rb")


def _directory(root: Path) -> Iterator[tuple[str, Opener | None]]:
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = Path(folder) / name
            rel = full.relative_to(root).as_posix()
            regular = full.is_file() and not full.is_symlink()
            yield rel, (_file_opener(full) if regular else None)


def _tarball(path: Path) -> Iterator[tuple[str, Opener | None]]:
    with tarfile.open(path, "r:*") as archive:
        for member in archive:
            safe = _safe_name(member.name)
            if not member.isfile() or not safe:
                if not member.isdir():
                    yield member.name, None
                continue
            yield member.name, _member_opener(archive, member)


def _member_opener(archive: tarfile.TarFile, member: tarfile.TarInfo) -> Opener:
    return lambda: archive.extractfile(member)


def _safe_name(name: str) -> bool:
    pure = PurePosixPath(name)
    return not pure.is_absolute() and ".." not in pure.parts and "\\" not in name


def _add(bundle: Bundle, name: str, opener: Opener, limits: _Limits) -> None:
    room = min(limits.member, limits.total - bundle.total)
    stream = opener()
    if stream is None:
        bundle.notes.append(f"{name}: skipped (no data)")
        return
    with stream:
        raw = stream.read(room + 1)
    if name.lower().endswith(".gz") and not name.lower().endswith((".tar.gz", ".tgz")):
        # Decompress at most room + 1 bytes: a gzip bomb costs no more than a big file.
        try:
            raw = zlib.decompressobj(wbits=31).decompress(raw[:room], room + 1)
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


def _reason(exc: BaseException) -> str:
    """One line: tarfile's ReadError lists every compression it tried, one per line."""
    if isinstance(exc, tarfile.ReadError):
        return "not a readable tar archive (.tar, .tar.gz or .tgz)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

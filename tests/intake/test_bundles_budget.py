"""The bundle reader's budget (issue 20): every decompressed byte, every archive entry and the
CPU time count, whatever the codec.

Covers: a multi-stream `.tar.bz2` whose one (binary, skipped) member expands far past the
budget stops at the budget with a note, not after hours; 20,000 directory entries stop at
BUNDLE_MAX_ENTRIES; the CPU-time deadline stops a slow bundle (an injected CPU clock); tarballs
compressed with gzip, bzip2, xz and zstd are read; a tarball inside a directory (the files
shared in a Slack thread) is read as a tarball, not skipped as binary; any bytes at all either
give a Bundle or the project's own UserInputError (generated input).
"""

from __future__ import annotations

import bz2
import io
import itertools
import lzma
import tarfile
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.errors import UserInputError
from bot.intake.bundles import Budget, read_bundle
from bot.limits import BUNDLE_MAX_ENTRIES

CHUNK = 4 * 1024 * 1024


def bz2_bomb(path: Path, *, streams: int) -> int:
    """A tar.bz2 of one member of `streams` * CHUNK zero bytes, one bz2 stream per chunk
    (the header in the first): small on disk, huge decompressed. Returns the member size."""
    size = streams * CHUNK
    info = tarfile.TarInfo("nvidia-bug-report.bin")
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    zeros = bz2.compress(b"\0" * CHUNK)
    with path.open("wb") as out:
        out.write(bz2.compress(header + b"\0" * CHUNK))
        for _ in range(streams - 1):
            out.write(zeros)
    return size


def test_a_bz2_bomb_stops_at_the_decompressed_budget(tmp_path: Path) -> None:
    bomb = tmp_path / "bundle.tar.bz2"
    size = bz2_bomb(bomb, streams=64)
    assert bomb.stat().st_size < 64 * 1024  # 256 MiB inside a few kilobytes
    budget = Budget(max_bytes=32 * 1024 * 1024)
    bundle = read_bundle(bomb, budget=budget)
    assert bundle.texts == []
    assert "stopped after 33554432 decompressed bytes (bundle budget)" in bundle.notes
    assert budget.spent_bytes <= budget.max_bytes + CHUNK < size


def test_directory_entries_count_and_stop(tmp_path: Path) -> None:
    path = tmp_path / "dirs.tar"
    with tarfile.open(path, "w") as archive:
        for i in range(BUNDLE_MAX_ENTRIES + 50):
            info = tarfile.TarInfo(f"d{i}")
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
    bundle = read_bundle(path)
    assert f"stopped after {BUNDLE_MAX_ENTRIES} archive entries (bundle budget)" in bundle.notes


def test_the_cpu_deadline_stops_a_slow_bundle(tmp_path: Path) -> None:
    path = tmp_path / "logs"
    path.mkdir()
    for i in range(5):
        (path / f"{i}.log").write_text("Xid 79 GPU has fallen off the bus\n" * 1000)
    ticks = itertools.count()
    budget = Budget(cpu_seconds=3, cpu=lambda: float(next(ticks)))
    bundle = read_bundle(path, budget=budget)
    assert "stopped after 3 s of CPU time (bundle budget)" in bundle.notes
    assert len(bundle.texts) < 5


def tarball(mode: str, path: Path, text: str) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        data = text.encode()
        info = tarfile.TarInfo("var/log/kern.log")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    compress = {
        "gz": lambda b: __import__("gzip").compress(b),
        "bz2": bz2.compress,
        "xz": lzma.compress,
        "zst": lambda b: zstandard.ZstdCompressor().compress(b),
    }[mode]
    path.write_bytes(compress(raw.getvalue()))
    return path


@pytest.mark.parametrize("mode", ["gz", "bz2", "xz", "zst"])
def test_each_codec_is_read(tmp_path: Path, mode: str) -> None:
    path = tarball(mode, tmp_path / f"bundle.tar.{mode}", "NVRM: Xid 79\n")
    bundle = read_bundle(path)
    assert bundle.texts == [("var/log/kern.log", "NVRM: Xid 79\n")]


def test_a_tarball_shared_in_a_folder_is_read_as_a_tarball(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    tarball("gz", shared / "x.tar.gz", "NVRM: Xid 48\n")
    bundle = read_bundle(shared)
    assert bundle.texts == [("x.tar.gz/var/log/kern.log", "NVRM: Xid 48\n")]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(max_size=4096),
    suffix=st.sampled_from(
        [".tar", ".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst", ".log.gz", ".txt"]
    ),
)
def test_any_bytes_give_a_bundle_or_one_user_error(
    tmp_path: Path, data: bytes, suffix: str
) -> None:
    path = tmp_path / f"bundle{suffix}"
    path.write_bytes(data)
    try:
        bundle = read_bundle(path, budget=Budget(max_bytes=1024 * 1024))
    except UserInputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("cannot read bundle")
    else:
        assert bundle.total <= 1024 * 1024

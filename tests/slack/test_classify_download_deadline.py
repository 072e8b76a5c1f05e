"""A shared file's download has an overall deadline (issue 20), not just a per-read timeout.

Covers: a body that drips in (13 bytes a read) past SLACK_DOWNLOAD_SECONDS on the injected
clock is abandoned with a note naming the deadline and leaves no partial file; a body within
the deadline and the size limit is saved whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx

from bot.limits import SLACK_DOWNLOAD_SECONDS
from bot.slack.classify import _save


def drip(reads: int) -> Iterator[bytes]:
    for _ in range(reads):
        yield b"Xid 79 on GPU"  # 13 bytes


def test_a_dripping_download_is_cut_at_the_overall_deadline(tmp_path: Path) -> None:
    seconds = itertools.count(0, 2)  # each read arrives 2 s after the one before
    response = httpx.Response(200, content=drip(1000))
    into = tmp_path / "kern.log"
    note = _save(response, into, name="kern.log", limit=1 << 20, deadline=SLACK_DOWNLOAD_SECONDS,
                 clock=lambda: float(next(seconds)))
    assert note == f"kern.log: not downloaded within {SLACK_DOWNLOAD_SECONDS:g} s"
    assert not into.exists()


def test_a_prompt_download_is_saved_whole(tmp_path: Path) -> None:
    response = httpx.Response(200, content=drip(10))
    into = tmp_path / "kern.log"
    note = _save(response, into, name="kern.log", limit=1 << 20, deadline=1.0, clock=lambda: 0.0)
    assert note is None
    assert into.read_bytes() == b"Xid 79 on GPU" * 10

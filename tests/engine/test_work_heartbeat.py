"""The lease heartbeat: one thread while this worker holds claims, none once it holds none, so a
closed runtime (every `eval` scenario, every test) leaves no thread behind.

Aspects: a held block starts the heartbeat; nested blocks share it; leaving the last block
stops it; a later block starts a fresh one.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from bot.engine.leases import LeaseKeeper
from storage.db import create_schema, make_engine


def _heartbeats() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lease-heartbeat" and t.is_alive()]


def _until_none_left(seconds: float = 10.0) -> list[threading.Thread]:
    """The heartbeat threads still alive once they had `seconds` to see their stop signal."""
    deadline = time.monotonic() + seconds
    while _heartbeats() and time.monotonic() < deadline:
        time.sleep(0.01)
    return _heartbeats()


def test_the_heartbeat_runs_only_while_claims_are_held(tmp_path: Path) -> None:
    db = make_engine(f"sqlite:///{tmp_path / 'oncall.db'}")
    create_schema(db)
    keeper = LeaseKeeper(db)
    assert _until_none_left() == []
    with keeper.holding():
        assert len(_heartbeats()) == 1
        with keeper.holding():
            assert len(_heartbeats()) == 1  # nested claims share one heartbeat
    assert _until_none_left() == []
    with keeper.holding():
        assert len(_heartbeats()) == 1  # a later claim starts a fresh one
    assert _until_none_left() == []
    db.dispose()

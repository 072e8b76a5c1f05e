"""The Slurm fixture leaves nothing behind when pytest is killed (tests/servers/slurm.py).

Covers: a cluster directory whose `owner.json` names a dead process is reaped by the next
session: every process carrying its `SLURM_CONF` (here a stand-in `sleep` in its own session,
as slurmstepd and job steps are) is killed and the directory removed; a cluster whose owner is
alive (another session's) and a directory without `owner.json` (not the fixture's to judge)
are left alone, processes and all.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.prometheus import poll
from tests.servers.slurm import OWNER_FILE, WORKDIR_PREFIX, identity, reap_stale


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def cluster_dir(tmp: Path, name: str, owner: dict[str, object] | None) -> Path:
    work = tmp / f"{WORKDIR_PREFIX}{name}"
    work.mkdir()
    if owner is not None:
        (work / OWNER_FILE).write_text(json.dumps(owner))
    return work


def stand_in(work: Path, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A process of that cluster: its own session, the cluster's SLURM_CONF."""
    env = dict(os.environ) | {"SLURM_CONF": str(work / "slurm.conf")}
    process = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)
    started.append(process)
    return process


def dead_owner() -> dict[str, object]:
    """An owner that has exited (its pid may be reused: the start time never matches)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return {"pid": child.pid, "started": "gone"}


def test_a_dead_sessions_cluster_is_reaped_and_live_ones_are_left(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    stale = cluster_dir(tmp_path, "stale", dead_owner())
    live = cluster_dir(tmp_path, "live", identity(os.getpid()))
    foreign = cluster_dir(tmp_path, "foreign", None)
    doomed, kept, other = (stand_in(w, started) for w in (stale, live, foreign))

    assert reap_stale(tmp_path) == [stale]
    poll(lambda: doomed.poll() is not None, what="the stale cluster's process killed")
    assert doomed.returncode == -9 and not stale.exists()
    assert kept.poll() is None and other.poll() is None
    assert live.exists() and foreign.exists()

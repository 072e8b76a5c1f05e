"""A closed standard output ends the printing, not the command (`gpu-oncall ... | head`).

Covers, with `gpu-oncall` as a real subprocess whose standard output is a pipe nobody reads
(the reader closed before the first line, so every write meets EPIPE): `diagnose` still drives
its run to its end state (the incident waits for approval, never stuck in `triaging`) and exits
0 with nothing on standard error (no BrokenPipeError traceback, no "Exception ignored" from the
interpreter's last flush); `incidents` exits 0 quietly too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def env_for(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GPU_ONCALL_STORAGE__URL"] = f"sqlite:///{tmp_path / 'oncall.db'}"
    return env


def into_closed_pipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with standard output a pipe whose read end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli.main", *args],
            cwd=tmp_path,
            env=env_for(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


def listed(tmp_path: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "incidents", "--json"],
        cwd=tmp_path,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return list(json.loads(done.stdout))


def test_diagnose_into_a_closed_pipe_finishes_its_run_quietly(tmp_path: Path) -> None:
    done = into_closed_pipe(tmp_path, "diagnose", "gpu-node-03")
    assert done.returncode == 0
    assert done.stderr == ""
    assert [(i["id"], i["state"]) for i in listed(tmp_path)] == [("INC-1", "awaiting_approval")]


def test_incidents_into_a_closed_pipe_prints_no_traceback(tmp_path: Path) -> None:
    into_closed_pipe(tmp_path, "diagnose", "gpu-node-03")
    done = into_closed_pipe(tmp_path, "incidents")
    assert done.returncode == 0
    assert done.stderr == ""

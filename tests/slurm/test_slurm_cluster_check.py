"""`gpu-oncall cluster check` on real Slurm (a CLI process per case, GPU_ONCALL_CLUSTER=slurm).

Covers: an operator (root) token passes every check and names the served REST version, that
node updates go through scontrol on 22.05 and whether its bot processes share their turns to
read a node (`slurm.turns_file`); a token for a non-operator fails the operator row naming why
(no slurmdbd: only root or SlurmUser); an invalid token fails the reads; the JSON form.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.servers.slurm import SlurmServers
from tests.slurm.test_slurm_ecc_storm_journey import slurm_env


def check(slurm: SlurmServers, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "cluster", "check", *env.pop("args", "").split()],
        cwd=tmp_path,
        env=slurm_env(slurm) | {"GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path}/o.db"} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_operator_token_passes_every_check(slurm: SlurmServers, tmp_path: Path) -> None:
    done = check(slurm, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "REST v0.0.38" in done.stdout and "All 7 permissions granted." in done.stdout
    note = "Note: REST v0.0.38 is Slurm 22.05 or older: two overlapping reads of one node crash"
    assert note in done.stdout and "set GPU_ONCALL_SLURM__TURNS_FILE" in done.stdout
    rows = {tuple(line.split()[:3]) for line in done.stdout.splitlines()}
    assert {("update", "nodes", "scontrol"), ("requeue", "jobs", "scontrol")} <= rows


def test_a_turns_file_is_named_in_the_note(slurm: SlurmServers, tmp_path: Path) -> None:
    turns = tmp_path / "turns"
    done = check(slurm, tmp_path, GPU_ONCALL_SLURM__TURNS_FILE=str(turns))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"this host's bot processes take turns through {turns}" in done.stdout
    assert turns.exists()


def test_a_non_operator_token_fails_the_operator_check(
    slurm: SlurmServers, tmp_path: Path
) -> None:
    token = slurm.token("nobody")
    done = check(slurm, tmp_path, GPU_ONCALL_SLURM__USER="nobody", GPU_ONCALL_SLURM__TOKEN=token)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "nobody is neither root nor SlurmUser (root)" in done.stdout
    assert "checks failed: operate as nobody (token), cancel jobs (slurmrestd)" in done.stdout


def test_an_invalid_token_fails_the_reads_as_json(slurm: SlurmServers, tmp_path: Path) -> None:
    done = check(slurm, tmp_path, GPU_ONCALL_SLURM__TOKEN="not-a-jwt", args="--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["cluster"] == "slurm" and not report["ok"]
    assert {"read nodes (slurmrestd)", "read jobs (slurmrestd)"} <= set(report["missing"])
    assert any("GPU_ONCALL_SLURM__TURNS_FILE" in note for note in report["notes"])

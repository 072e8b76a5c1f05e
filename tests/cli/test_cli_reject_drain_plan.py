"""`reject INC-N --only drain` from the command line, as processes (bot/engine/deferred.py).

Covers: on the simulated fleet a command waits out the drain's checkpoint itself, so `approve`
cordons, waits for llm-pretrain's next checkpoint and then drains, saying so; `reject --only`
while an ordinary approval is pending exits 2 and says what it is for, leaving the approval
pending.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from simulator import SCENARIO_DIR
from tests.cli.cli_process import run_cli

SCENARIO = str(Path(SCENARIO_DIR) / "ecc-dbe-storm.yaml")


def cli(tmp_path: Path, *args: str, user: str = "alice") -> subprocess.CompletedProcess[str]:
    who = {"USER": user, "LOGNAME": user, "GPU_ONCALL_IDENTITY__CLI_USER": None}
    return run_cli(tmp_path, *args, env=who)


def test_reject_only_is_for_a_waiting_drain_and_approve_drains_after_the_checkpoint(
    tmp_path: Path,
) -> None:
    asked = cli(tmp_path, "diagnose", "gpu-node-03", "--scenario", SCENARIO)
    assert asked.returncode == 0 and "Approval needed (INC-1" in asked.stdout, asked.stderr
    refused = cli(tmp_path, "reject", "INC-1", "--only", "drain", user="bob")
    assert refused.returncode == 2
    assert "reject --only cancels a drain that waits for the next checkpoint" in refused.stderr
    approved = cli(tmp_path, "approve", "INC-1", user="bob")
    assert approved.returncode == 0, approved.stdout + approved.stderr
    record = json.loads(cli(tmp_path, "postmortem", "INC-1", "--format", "json").stdout)
    lines = [e["summary"] for e in record["timeline"]]
    scheduled = next(i for i, s in enumerate(lines) if s.startswith("Drain of gpu-node-03 sch"))
    drained = next(i for i, s in enumerate(lines) if "drained" in s)
    assert lines.index("gpu-node-03 cordoned") < scheduled < drained
    assert "after the next checkpoint (llm-pretrain checkpointed" in lines[drained]

"""Sim mode writes the simulated fleet's state through: a real process that cordons and drains
a node through the Cluster port and is then SIGKILLed (no `finally`, no runtime close) loses
neither write; the next runtime on the same database sees the node cordoned and drained.

Covers: the state file exists right after the write, is complete JSON (written to a temp file
and renamed), names the scenario, and replays in a new runtime; an approval in that new
runtime continues on the same fleet (saved scenario).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from bot.config import Settings, StorageSettings
from bot.wiring.simulation import saved_scenario
from bot.wiring.runtime import open_runtime

NODE = "gpu-node-03"
WRITE_THEN_DIE = (
    "import os, signal, sys\n"
    "from datetime import timedelta\n"
    "from pathlib import Path\n"
    "from bot.config import Settings\n"
    "from bot.wiring.runtime import open_runtime\n"
    "with open_runtime(Settings(), scenario_path=Path(sys.argv[1]), fresh=True) as rt:\n"
    f"    rt.deps.cluster.cordon('{NODE}')\n"
    f"    rt.deps.cluster.drain('{NODE}', grace=timedelta(seconds=30))\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
)


def test_a_killed_process_loses_no_cluster_write(tmp_path: Path, scenario_dir: Path) -> None:
    url = f"sqlite:///{tmp_path / 'oncall.db'}"
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    killed = subprocess.run(
        [sys.executable, "-c", WRITE_THEN_DIE, str(scenario)],
        cwd=tmp_path,
        env=dict(os.environ) | {"GPU_ONCALL_STORAGE__URL": url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    state = json.loads((tmp_path / "oncall.sim-state.json").read_text())
    verbs = [(e["verb"], e["node"]) for e in state["fleet"]["journal"]]
    assert verbs == [("cordon", NODE), ("drain", NODE)]
    assert not list(tmp_path.glob(".sim-state.*"))  # no temp file left behind

    settings = Settings(storage=StorageSettings(url=url))
    assert saved_scenario(settings) == scenario
    with open_runtime(settings, scenario_path=saved_scenario(settings)) as rt:
        assert rt.fleet is not None
        info = rt.deps.cluster.nodes([NODE])[0]
        assert info.unschedulable
        assert rt.fleet.drained_at(NODE) is not None

"""The simulated fleet's clock (bot/wiring/simulation.py `_clock`) when several runtimes share
one database, as `serve` and the CLI do, or a crashed worker and the one that takes over.

Covers: a runtime's clock never starts behind the wall clock, so one opened after another never
reads a time before what the first one stamped. (A clock that started at the whole second, up
to a second behind, stamped a transition before the incident's detection, and the takeover
found the dead worker's work row not due yet.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bot.config import Settings
from bot.wiring.runtime import open_runtime


def test_a_runtime_opened_later_reads_no_earlier_time(
    settings: Settings, scenario_dir: Path
) -> None:
    scenario = scenario_dir / "ecc-dbe-storm.yaml"
    wall = datetime.now(UTC)
    with open_runtime(settings, scenario_path=scenario, fresh=True) as first:
        assert first.clock.now() >= wall
        for _ in range(3):
            seen, wall = first.clock.now(), datetime.now(UTC)
            with open_runtime(settings, scenario_path=scenario) as later:
                assert later.clock.now() >= max(seen, wall)

"""The simulated GPU fleet: both ports in-process (SimTelemetry, SimCluster) over one Fleet,
built from a scenario file (DESIGN.md §10). The embedded default and the evaluation harness.

    fleet = Fleet(load_scenario(SCENARIO_DIR / "ecc-dbe-storm.yaml"), now=clock.now)
    telemetry, cluster = SimTelemetry(fleet, catalog), SimCluster(fleet)

Never imports `bot`; the clock is injected as a plain callable.
"""

from simulator.cluster import SimCluster
from simulator.fleet import Fleet, Series
from simulator.scenarios import SCENARIO_DIR, Scenario, load_scenario
from simulator.telemetry import SimTelemetry

__all__ = [
    "SCENARIO_DIR",
    "Fleet",
    "Scenario",
    "Series",
    "SimCluster",
    "SimTelemetry",
    "load_scenario",
]

"""Fixtures for the simulated-fleet tests: a fake clock, the signal catalog, fleet factories.

Time only moves when a test advances the clock; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from integrations.signals import SignalCatalog, load_signal_catalog
from simulator import SCENARIO_DIR, Fleet, SimCluster, SimTelemetry, load_scenario
from simulator.scenarios import parse_scenario
from runbooks import SIGNALS_FILE

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class StepClock:
    """A clock callable that only moves when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self.at = start

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture(scope="session")
def catalog() -> SignalCatalog:
    return load_signal_catalog(SIGNALS_FILE)


def scenario_dict(
    *,
    nodes: int = 16,
    faults: list[dict[str, Any]] | None = None,
    counters: str = "all",
    workloads: list[dict[str, Any]] | None = None,
    name: str = "test-fleet",
) -> dict[str, Any]:
    """A minimal valid scenario as YAML would parse it."""
    width = max(2, len(str(nodes - 1)))
    first = f"gpu-node-{0:0{width}d}"
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": name},
        "fleet": {
            "nodes": nodes,
            "dcgm_counters": counters,
            "workloads": workloads
            if workloads is not None
            else [
                {
                    "kind": "training",
                    "name": "llm-pretrain",
                    "nodes": f"gpu-node-[{0:0{width}d}-{7:0{width}d}]",
                }
            ],
        },
        "faults": faults or [],
        "trigger": {"command": f"diagnose {first}"},
    }


FleetFactory = Callable[..., Fleet]


@pytest.fixture
def make_fleet(clock: StepClock) -> FleetFactory:
    """`make_fleet(faults=[...], nodes=16, counters="all")` or `make_fleet(scenario="x.yaml")`."""

    def build(scenario: str | None = None, **kwargs: Any) -> Fleet:
        if scenario is not None:
            return Fleet(load_scenario(SCENARIO_DIR / scenario), clock)
        return Fleet(parse_scenario(scenario_dict(**kwargs)), clock)

    return build


@pytest.fixture
def sim(
    make_fleet: FleetFactory, catalog: SignalCatalog
) -> Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]:
    """Fleet plus both ports over it."""

    def build(scenario: str | None = None, **kwargs: Any) -> tuple[Fleet, SimTelemetry, SimCluster]:
        fleet = make_fleet(scenario, **kwargs)
        return fleet, SimTelemetry(fleet, catalog), SimCluster(fleet)

    return build


@pytest.fixture
def raw_scenario() -> Callable[..., dict[str, Any]]:
    """The `scenario_dict` builder, for tests that edit a scenario before parsing it."""
    return scenario_dict

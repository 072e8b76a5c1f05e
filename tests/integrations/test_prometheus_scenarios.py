"""Runbooks diagnose the same through a real Prometheus as through the in-process fleet.

Covers: for each scenario below (ECC storms with and without the ECC counters, IB symbol
errors, an IB port down, a row-remap failure, a GPU fallen off the bus, a node NotReady, an
exporter down, a healthy node; the mission runbooks are in test_prometheus_missions.py), the
runbook listed with it, run through the real engine once with SimTelemetry and once with
PrometheusTelemetry (Debian's prometheus scraping that fleet's exporter endpoint), gives the
same layer, culprits, missing signals and fired checks; and it is the scenario's expected
layer where the scenario states one. Both runs read logs and nodes from the same fleet.

All fleets share one Prometheus (one scrape job each, told apart by a `fleet` label), with
their last 20 minutes backfilled (servers/history.py) so the runbooks' 15-minute windows are
full from the first query; faults start in the past, as the scenario files say.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers.world import EXTRA_READS, World, diagnosis_of, run_both, start_scenario_world

from bot.config import Settings
from bot.wiring.runtime import load_catalogs
from integrations.signals import SignalCatalog

#: (scenario file, runbook, inputs): node runbooks, each on its scenario's faulty node.
CASES: list[tuple[str, str, dict[str, str]]] = [
    ("ecc-dbe-storm.yaml", "ecc-storm", {"node": "gpu-node-03"}),
    ("ecc-dbe-storm.yaml", "node-diagnose", {"node": "gpu-node-03"}),
    ("ecc-dbe-default-counters.yaml", "ecc-storm", {"node": "gpu-node-03"}),
    ("ib-symbol-errors.yaml", "node-diagnose", {"node": "gpu-node-11"}),
    ("ib-port-down.yaml", "node-diagnose", {"node": "gpu-node-01"}),
    ("row-remap-failure.yaml", "node-diagnose", {"node": "gpu-node-09"}),
    ("gpu-fallen-off-bus.yaml", "node-diagnose", {"node": "gpu-node-05"}),
    ("node-not-ready.yaml", "node-diagnose", {"node": "gpu-node-14"}),
    ("exporter-down.yaml", "node-diagnose", {"node": "gpu-node-04"}),
    ("healthy-node.yaml", "node-diagnose", {"node": "gpu-node-05"}),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, catalog: SignalCatalog) -> Iterator[World]:
    world = start_scenario_world(tmp_path_factory.mktemp("scenarios"), CASES, catalog=catalog)
    yield world
    world.close()


@pytest.fixture(scope="module")
def catalogs() -> Any:
    return load_catalogs(Settings())


@pytest.mark.parametrize(("scenario", "runbook", "inputs"), CASES, ids=lambda v: str(v))
def test_prometheus_diagnosis_equals_the_in_process_one(
    world: World,
    catalog: SignalCatalog,
    catalogs: Any,
    tmp_path: Path,
    scenario: str,
    runbook: str,
    inputs: dict[str, str],
) -> None:
    name = Path(scenario).stem
    through_sim, through_prometheus, prometheus, sim = run_both(
        world,
        name,
        catalog=catalog,
        catalogs=catalogs,
        workdir=tmp_path,
        runbook=runbook,
        inputs=inputs,
    )
    assert diagnosis_of(through_prometheus) == diagnosis_of(through_sim)
    assert through_prometheus.status == through_sim.status
    signal_steps = sum(1 for out in through_sim.steps.values() if out.get("kind") == "signal")
    # Both paths send the same reads: one per signal step, the held-gauge and detector-liveness
    # checks, the evidence snapshot; never a verify
    # read (the runs stop at the approval).
    assert prometheus.queries == sim.queries
    assert signal_steps <= prometheus.queries <= signal_steps + EXTRA_READS, prometheus.queries
    expect = world.fleets[name].scenario.expect
    if expect is not None and expect.runbook == runbook:
        assert through_prometheus.verdict["layer"] == expect.layer

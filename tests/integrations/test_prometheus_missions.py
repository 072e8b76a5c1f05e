"""The mission runbooks (nccl-hang, mfu-regression, inference-slo-breach) and the storm runbook
(node-storm) diagnose the same through a real Prometheus as through the in-process fleet.

Covers: for one or more scenarios of each, the runbook run on its job, service or storm members
through SimTelemetry and through PrometheusTelemetry (Debian's prometheus scraping that
fleet's exporter endpoint: dcgm-exporter, node_exporter, kube-state-metrics, job metrics,
vLLM histograms) gives the same layer, culprits, missing signals and fired checks, the
scenario's expected layer; and the query count stays one per signal step, whatever the job's
size. Node signals for a job find the job's nodes inside their one query (kube-state-metrics);
a storm's shared leaf switch and driver version are found from fleet-wide reads.

The fleets' last 32 minutes are backfilled (mfu-regression looks back 30 minutes).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from servers.world import EXTRA_READS, World, diagnosis_of, run_both, start_scenario_world

from bot.config import Settings
from bot.wiring.runtime import load_catalogs
from integrations.signals import SignalCatalog

#: (scenario file, runbook, inputs).
CASES: list[tuple[str, str, dict[str, str]]] = [
    ("nccl-hang-straggler-rank.yaml", "nccl-hang", {"job": "llm-pretrain"}),
    ("mfu-ib-symbol-errors.yaml", "mfu-regression", {"job": "llm-pretrain"}),
    ("slo-kv-cache-exhaustion.yaml", "inference-slo-breach", {"service": "vllm-chat"}),
    ("storm-leaf-switch-down.yaml", "node-storm", {"nodes": "gpu-node-[024-031]"}),
    ("storm-driver-rollout-xid.yaml", "node-storm", {"nodes": "gpu-node-[040-047]"}),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, catalog: SignalCatalog) -> Iterator[World]:
    world = start_scenario_world(
        tmp_path_factory.mktemp("missions"),
        CASES,
        catalog=catalog,
        history=timedelta(minutes=32),  # mfu-regression reads 30 minutes
    )
    yield world
    world.close()


@pytest.fixture(scope="module")
def catalogs() -> Any:
    return load_catalogs(Settings())


@pytest.mark.parametrize(("scenario", "runbook", "inputs"), CASES, ids=lambda v: str(v))
def test_mission_runbook_through_prometheus_equals_the_in_process_one(
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
    signal_steps = sum(1 for out in through_sim.steps.values() if out.get("kind") == "signal")
    impact = sum(o.get("queries", 0) for o in through_sim.steps.values() if o["kind"] == "propose")
    # Both paths send the same reads: one per signal step, the held-gauge and detector-liveness
    # checks, the evidence snapshot and the cordon/drain impact's job reads; never a verify
    # read (the runs stop at the approval).
    assert prometheus.queries == sim.queries
    least = signal_steps + impact
    assert least <= prometheus.queries <= least + EXTRA_READS, prometheus.queries
    expect = world.fleets[name].scenario.expect
    assert expect is not None and expect.runbook == runbook
    assert through_prometheus.verdict["layer"] == expect.layer
    assert through_prometheus.verdict["culprits"] == expect.culprits

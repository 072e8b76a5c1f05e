"""SimTelemetry.read_range: the signal over time, as a Prometheus range query would give it.

Covers: every point equals an instant `read` at that time (so a postmortem's snapshot agrees
with what the run saw); points are oldest first on the requested step grid; the DBE storm's GPU
is 0 before the fault and 6/min inside it; a range read is one backend query whatever the node
count; an empty or inverted range is refused with the signal named.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from simulator import Fleet, SimCluster, SimTelemetry
from integrations.telemetry import SignalQuery

Sim = Callable[..., tuple[Fleet, SimTelemetry, SimCluster]]
STORM = [{"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "10m"}]
WINDOW = timedelta(minutes=1)


def test_each_point_equals_an_instant_read_at_its_time(sim: Sim, clock: object) -> None:
    fleet, telemetry, _ = sim(faults=STORM)
    query = SignalQuery(signal="gpu.ecc.dbe_rate", nodes=("gpu-node-03",), window=WINDOW)
    start = fleet.now()
    series = telemetry.read_range(
        query, start=start, end=start + timedelta(minutes=20), step=timedelta(minutes=5)
    )
    gpu5 = next(s for s in series if s.labels["gpu"] == "5")
    grid = [start + timedelta(minutes=m) for m in (0, 5, 10, 15, 20)]
    assert [at for at, _ in gpu5.points] == grid
    for at, value in gpu5.points:
        clock.advance(seconds=(at - fleet.now()).total_seconds())  # type: ignore[attr-defined]
        now = {(s.node, s.labels["gpu"]): s.value for s in telemetry.read(query).samples}
        assert now[("gpu-node-03", "5")] == pytest.approx(value)
    values = [v for _, v in gpu5.points]
    assert values[0] == 0.0 and values[1] == 0.0 and values[-1] == pytest.approx(6.0)


def test_a_range_read_is_one_backend_query(sim: Sim) -> None:
    fleet, telemetry, _ = sim(faults=STORM)
    before = telemetry.queries
    series = telemetry.read_range(
        SignalQuery(signal="gpu.ecc.dbe_rate", nodes=tuple(fleet.node_names), window=WINDOW),
        start=fleet.now(),
        end=fleet.now() + timedelta(minutes=30),
        step=timedelta(seconds=15),
    )
    assert telemetry.queries == before + 1
    assert {s.node for s in series} == set(fleet.node_names)
    assert all(len(s.points) == 121 for s in series)


def test_an_inverted_range_is_refused(sim: Sim) -> None:
    fleet, telemetry, _ = sim(faults=STORM)
    query = SignalQuery(signal="gpu.ecc.dbe_rate", nodes=("gpu-node-03",))
    with pytest.raises(ValueError, match="gpu.ecc.dbe_rate"):
        telemetry.read_range(
            query, start=fleet.now(), end=fleet.now() - timedelta(minutes=1), step=WINDOW
        )
    with pytest.raises(ValueError, match="step > 0"):
        telemetry.read_range(query, start=fleet.now(), end=fleet.now(), step=timedelta(0))

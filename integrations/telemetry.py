"""The Telemetry port: read named signals (runbooks/signals.yaml) for a batch of nodes.

Ports speak the domain (signal names, validated node names), never PromQL. Implemented by
`simulator.telemetry.SimTelemetry` and `integrations.prometheus.PrometheusTelemetry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from integrations.names import check_node_name


@dataclass(frozen=True)
class SignalQuery:
    """Which signal, for which nodes (or which workload), over which window."""

    signal: str
    nodes: tuple[str, ...] = ()
    window: timedelta = timedelta(minutes=15)
    workload: str | None = None

    def __post_init__(self) -> None:
        for node in self.nodes:
            check_node_name(node)
        if self.window <= timedelta(0):
            raise ValueError(f"signal '{self.signal}': window must be positive")


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of a signal: the node it belongs to and the identifying labels
    (`gpu`, `UUID`, `device`, `port`, `pod`, ...), as the exporter names them."""

    node: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SignalResult:
    """The answer to a SignalQuery.

    Absence is data: a node with no series is listed in `missing_nodes`, never given 0.0
    (a silent exporter cannot be trusted). `queries` counts backend queries issued.
    """

    signal: str
    samples: tuple[Sample, ...] = ()
    missing_nodes: tuple[str, ...] = ()
    queries: int = 1


@dataclass(frozen=True)
class SeriesPoints:
    """One signal series over time (a range read): its node, identity labels and points, oldest
    first. A step where the series had no value has no point (absence is data, never 0.0)."""

    node: str
    labels: dict[str, str]
    points: tuple[tuple[datetime, float], ...]


class Telemetry(Protocol):
    """Reads named signals for a batch of nodes.

    The number of backend queries per call does not grow with len(query.nodes). Nodes with no
    data are listed in `missing_nodes`. Raises TelemetryUnavailable only when the backend
    cannot answer at all.
    """

    def read(self, query: SignalQuery) -> SignalResult: ...

    def read_range(
        self, query: SignalQuery, *, start: datetime, end: datetime, step: timedelta
    ) -> list[SeriesPoints]:
        """The signal evaluated every `step` over `[start, end]` as one backend query, each
        point over `query.window` (the series behind a verdict, kept for the postmortem)."""
        ...

"""SimTelemetry: the Telemetry port answered natively from the simulated fleet's series.

Evaluates a SignalSpec the way its PromQL would: select the metric's series by the catalog's
label matchers and the host label, apply the range function over `[now − window, now]`, scale.
One read is one backend query, whatever the node count; `queries` counts them for tests.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from integrations.signals import DEFAULT_HOST_LABELS, SignalCatalog
from integrations.sim.fleet import Fleet
from integrations.sim.tracks import SampleGrid, evaluate
from integrations.telemetry import Sample, SignalQuery, SignalResult


class SimTelemetry:
    """Reads named signals from a Fleet. Stricter than production: it counts queries."""

    def __init__(
        self,
        fleet: Fleet,
        catalog: SignalCatalog,
        *,
        host_labels: Mapping[str, str] = DEFAULT_HOST_LABELS,
    ) -> None:
        self.fleet = fleet
        self.catalog = catalog
        self.host_labels = dict(host_labels)
        self.queries = 0
        self._lock = threading.Lock()

    def read(self, query: SignalQuery) -> SignalResult:
        """Evaluate `query.signal` for its nodes (or its workload's nodes, or the whole fleet).

        Nodes without a series, including unknown nodes, are listed in `missing_nodes`.
        Raises UnknownSignal for a signal the catalog lacks.
        """
        spec = self.catalog.get(query.signal)
        with self._lock:
            self.queries += 1
        nodes = self._nodes(query)
        end = self.fleet.offset(self.fleet.now())
        grid = SampleGrid.over(start=end - query.window.total_seconds(), end=end)
        samples: list[Sample] = []
        fn, scale, identity = spec.fn, spec.scale, spec.identity_labels
        host = self.host_labels.get(spec.source, DEFAULT_HOST_LABELS[spec.source])
        match = tuple(spec.match.items())
        for track in self.fleet.tracks(spec.metric, nodes):
            labels = track.labels
            if labels.get(host) != track.node or any(labels.get(k) != v for k, v in match):
                continue
            result = evaluate(track, fn, grid=grid)
            if result is None:
                continue
            value, last = result
            if track.value_labels is not None:
                labels = track.labels_for(last)
            keep = {k: labels[k] for k in identity if k in labels}
            samples.append(Sample(node=track.node, value=value * scale, labels=keep))
        seen = {s.node for s in samples}
        missing = tuple(n for n in nodes if n not in seen)
        return SignalResult(
            signal=query.signal, samples=tuple(samples), missing_nodes=missing, queries=1
        )

    def _nodes(self, query: SignalQuery) -> list[str]:
        if query.nodes:
            return list(dict.fromkeys(query.nodes))
        if query.workload is not None:
            return self.fleet.workload_nodes(query.workload)
        return self.fleet.node_names

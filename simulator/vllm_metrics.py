"""vLLM's `/metrics` as each replica of a simulated inference service exports it.

V1 engine metrics (DOMAIN.md §5.1) with their real names, types and histogram buckets, labelled
`model_name` and `engine` by vLLM plus `service` (workload name) and `node` from the scrape
config. Healthy series are closed-form lines; a disturbed service drives them from its model
(serving.py), histogram buckets included.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from simulator import serving
from simulator.metric_base import MetricDef, NodeView, Seed
from simulator.serving import HISTOGRAMS, Histogram, InferenceService, ReplicaState

Gauge = Callable[[ReplicaState], float]
_VLLM_GAUGES: dict[str, tuple[str, float, Gauge]] = {
    "vllm:num_requests_running": (
        "Number of requests in model execution batches.",
        serving.RUNNING,
        lambda s: s.running,
    ),
    "vllm:num_requests_waiting": (
        "Number of requests waiting to be processed.",
        0.0,
        lambda s: s.waiting,
    ),
    "vllm:kv_cache_usage_perc": (
        "KV-cache usage. 1 means 100 percent usage.",
        serving.KV_USAGE,
        lambda s: s.kv_usage,
    ),
}
_VLLM_COUNTERS: dict[str, tuple[str, float, Gauge]] = {
    "vllm:num_preemptions_total": (
        "Cumulative number of preemption from the engine.",
        120.0,
        lambda s: s.preemptions_per_s,
    ),
    "vllm:prompt_tokens_total": (
        "Number of prefill tokens processed.",
        serving.SERVED_AT_T0 * serving.PROMPT_TOKENS,
        lambda s: s.request_rate * serving.PROMPT_TOKENS,
    ),
    "vllm:generation_tokens_total": (
        "Number of generation tokens processed.",
        serving.SERVED_AT_T0 * serving.GENERATION_TOKENS,
        lambda s: s.request_rate * serving.GENERATION_TOKENS,
    ),
}


def _replica(view: NodeView) -> tuple[InferenceService, dict[str, str], float | None] | None:
    placed = view.placed("inference")
    if placed is None:
        return None
    workloads, placement = placed
    service = workloads.service(placement.workload.name)
    if service is None:
        return None
    labels = {
        "model_name": serving.MODEL_NAME,
        "engine": "0",
        "service": service.name,
        "node": view.spec.name,
        "namespace": placement.pod.namespace,
        "pod": placement.pod.name,
    }
    return service, labels, placement.pod.stopped_at


def _gauge_seeds(metric: str) -> Callable[[NodeView], list[Seed]]:
    _help, base, read = _VLLM_GAUGES[metric]

    def seeds(view: NodeView) -> list[Seed]:
        found = _replica(view)
        if found is None:
            return []
        service, labels, gone = found
        node = view.spec.name
        computed = (lambda t: read(service.state(node, t))) if service.disturbed else None
        return [Seed(("vllm",), labels, base, 0.0, computed, gone)]

    return seeds


def _counter_seeds(
    rate: Gauge, base: float, *, extra: tuple[tuple[str, str], ...] = ()
) -> Callable[[NodeView], list[Seed]]:
    def seeds(view: NodeView) -> list[Seed]:
        found = _replica(view)
        if found is None:
            return []
        service, labels, gone = found
        node = view.spec.name
        computed = None
        if service.disturbed:
            computed = lambda t: service.counter(node, t, rate=rate, base=base)  # noqa: E731
        entity = ("vllm", *(v for _k, v in extra))
        return [
            Seed(entity, {**labels, **dict(extra)}, base, rate(serving.HEALTHY), computed, gone)
        ]

    return seeds


def _share_of_requests(share: float) -> Gauge:
    return lambda s: s.request_rate * share


_SUCCESS = [
    _counter_seeds(
        _share_of_requests(share),
        serving.SERVED_AT_T0 * share,
        extra=(("finished_reason", reason),),
    )
    for reason, share in serving.FINISHED_REASONS.items()
]


def _success_seeds(view: NodeView) -> list[Seed]:
    return [seed for seeds in _SUCCESS for seed in seeds(view)]


def _histogram_defs(h: Histogram) -> list[MetricDef]:
    layouts = [
        _bucket_seeds(h, le, "+Inf" if math.isinf(le) else repr(le))
        for le in (*h.buckets, math.inf)
    ]

    def buckets(view: NodeView) -> list[Seed]:
        if view.placed("inference") is None:
            return []
        return [seed for layout in layouts for seed in layout(view)]

    mean = h.latency(serving.HEALTHY).mean
    per = h.per_request
    total = _counter_seeds(lambda s: s.request_rate * per, serving.SERVED_AT_T0 * per)
    sums = _counter_seeds(
        lambda s: s.request_rate * per * h.latency(s).mean, serving.SERVED_AT_T0 * per * mean
    )
    return [
        _vllm(f"{h.name}_bucket", buckets, help_=h.help),
        _vllm(f"{h.name}_count", total, help_=h.help),
        _vllm(f"{h.name}_sum", sums, help_=h.help),
    ]


def _bucket_seeds(h: Histogram, le: float, label: str) -> Callable[[NodeView], list[Seed]]:
    per = h.per_request

    def rate(s: ReplicaState) -> float:
        return s.request_rate * per * h.latency(s).cdf(le)

    base = serving.SERVED_AT_T0 * per * h.latency(serving.HEALTHY).cdf(le)
    plain = _counter_seeds(rate, base, extra=(("le", label),))

    def seeds(view: NodeView) -> list[Seed]:
        found = _replica(view)
        if found is None or not found[0].disturbed:
            return plain(view)
        service, node = found[0], view.spec.name
        computed = lambda t: service.bucket(node, t, histogram=h, le=le)  # noqa: E731
        return [s._replace(computed=computed) for s in plain(view)]

    return seeds


def _vllm(name: str, seeds: Callable[[NodeView], list[Seed]], *, help_: str) -> MetricDef:
    return MetricDef(name=name, family="vllm", kind="counter", help=help_, seeds=seeds)


def _all() -> list[MetricDef]:
    defs = [
        MetricDef(name=n, family="vllm", kind="gauge", help=h, seeds=_gauge_seeds(n))
        for n, (h, _b, _r) in _VLLM_GAUGES.items()
    ]
    defs += [
        MetricDef(name=n, family="vllm", kind="counter", help=h, seeds=_counter_seeds(r, b))
        for n, (h, b, r) in _VLLM_COUNTERS.items()
    ]
    defs.append(
        MetricDef(
            name="vllm:request_success_total",
            family="vllm",
            kind="counter",
            help="Count of successfully processed requests.",
            seeds=_success_seeds,
        )
    )
    for histogram in HISTOGRAMS.values():
        defs += _histogram_defs(histogram)
    return defs


VLLM_METRICS: tuple[MetricDef, ...] = tuple(_all())

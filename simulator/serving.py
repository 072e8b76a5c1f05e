"""The simulated inference service: what each vLLM replica reports, given the faults on it.

Phenomenological on purpose: each replica serves ~12 requests/s with ~46 running, KV cache half
used, TTFT p99 ~0.3 s and inter-token latency p99 ~45 ms; `ServiceEffect`s scale the load and
latency and add queueing, KV pressure and preemptions, and effects compose. Latencies are
log-normal with the state's p50/p99, and histogram buckets are exact integrals of
`rate x CDF(le)`, so `histogram_quantile` over them reads what a real vLLM would. Pure.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from simulator.fault_base import ServiceEffect
from simulator.piecewise import integrate, window_breaks, windows_key

MODEL_NAME = "meta-llama/Llama-3.1-70B-Instruct"
REQUEST_RATE = 12.0
RUNNING = 46.0
KV_USAGE = 0.5
BATCH_HEADROOM = 1.4
"""How far the running batch can grow before requests queue (max_num_seqs / running)."""
PROMPT_TOKENS = 1400.0
GENERATION_TOKENS = 180.0
SERVED_AT_T0 = 3.0e6
"""Requests served before the fleet was built (the counters' value at t0)."""
FINISHED_REASONS = {"stop": 0.90, "length": 0.09, "abort": 0.01}
_Z99 = 2.3263
CACHE_LIMIT = 100_000


@dataclass(frozen=True)
class Latency:
    """A log-normal latency by its median and 99th percentile, seconds."""

    p50: float
    p99: float

    @property
    def _sigma(self) -> float:
        return _sigma(self.p50, self.p99)

    def cdf(self, x: float) -> float:
        return _lognormal_cdf(self.p50, self.p99, x)

    @property
    def mean(self) -> float:
        return self.p50 * math.exp(self._sigma**2 / 2.0)


def _sigma(p50: float, p99: float) -> float:
    return max(math.log(p99 / p50) / _Z99, 1e-6)


@functools.lru_cache(maxsize=65_536)
def _lognormal_cdf(p50: float, p99: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if math.isinf(x):
        return 1.0
    z = (math.log(x) - math.log(p50)) / (_sigma(p50, p99) * math.sqrt(2.0))
    return 0.5 * (1.0 + math.erf(z))


@dataclass(frozen=True)
class ReplicaState:
    """One replica's readings at one moment."""

    request_rate: float
    running: float
    waiting: float
    kv_usage: float
    preemptions_per_s: float
    ttft: Latency
    itl: Latency
    queue: Latency


@dataclass(frozen=True)
class Histogram:
    """A vLLM histogram: its buckets, how many observations a request makes, which latency."""

    name: str
    help: str
    buckets: tuple[float, ...]
    per_request: float
    latency: Callable[[ReplicaState], Latency]


_REQUEST_LATENCY: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0)
_REQUEST_LATENCY += (30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
#: Bucket boundaries as vllm/v1/metrics/loggers.py declares them.
HISTOGRAMS: dict[str, Histogram] = {
    h.name: h
    for h in (
        Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
            + (7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
            1.0,
            lambda s: s.ttft,
        ),
        Histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
            + (7.5, 10.0, 20.0, 40.0, 80.0),
            GENERATION_TOKENS,
            lambda s: s.itl,
        ),
        Histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            _REQUEST_LATENCY,
            1.0,
            lambda s: s.queue,
        ),
    )
}
HEALTHY = ReplicaState(
    request_rate=REQUEST_RATE,
    running=RUNNING,
    waiting=0.0,
    kv_usage=KV_USAGE,
    preemptions_per_s=0.0,
    ttft=Latency(0.12, 0.26),
    itl=Latency(0.025, 0.045),
    queue=Latency(0.004, 0.02),
)


class InferenceService:
    """One inference workload: its replicas (`node -> replica index`) and the effects on it."""

    def __init__(
        self, name: str, *, replicas: Mapping[str, int], effects: Sequence[ServiceEffect]
    ) -> None:
        self.name = name
        self.replicas = dict(replicas)
        self.effects = [e for e in effects if e.node in self.replicas or e.node is None]
        self._cache: dict[tuple[object, ...], ReplicaState] = {}

    @property
    def disturbed(self) -> bool:
        return bool(self.effects)

    def state(self, node: str, t: float) -> ReplicaState:
        key = (node, t, windows_key())
        found = self._cache.get(key)
        if found is None:
            found = self._compute(node, t)
            if len(self._cache) > CACHE_LIMIT:
                self._cache.clear()  # bounded: a long-running fleet's memory stays flat
            self._cache[key] = found
        return found

    def counter(
        self, node: str, t: float, *, rate: Callable[[ReplicaState], float], base: float
    ) -> float:
        """A counter whose rate is `rate(state)`, worth `base` at t0."""
        breaks = window_breaks(e.window for e in self.effects)
        return base + integrate(
            lambda s: rate(self.state(node, s)), start=0.0, end=t, breaks=breaks
        )

    def bucket(self, node: str, t: float, *, histogram: Histogram, le: float) -> float:
        """`<histogram>_bucket{le}` at `t`: observations at or below `le` since the start."""
        per = histogram.per_request
        healthy = histogram.latency(HEALTHY).cdf(le)
        return self.counter(
            node,
            t,
            rate=lambda s: s.request_rate * per * histogram.latency(s).cdf(le),
            base=SERVED_AT_T0 * per * healthy,
        )

    def _compute(self, node: str, t: float) -> ReplicaState:
        load = compute = 1.0
        kv = waiting = queue = preempt = 0.0
        for e in self.effects:
            if (e.node is None or e.node == node) and e.window.active(t):
                load *= e.load
                compute *= e.compute
                kv = max(kv, e.kv_usage)
                waiting += e.waiting
                queue += e.queue_s
                preempt += e.preemptions_per_s
        batch = min(load, BATCH_HEADROOM)
        itl_factor = compute * (1.0 + 0.75 * max(0.0, batch - 1.0)) * (1.5 if preempt else 1.0)
        return ReplicaState(
            request_rate=REQUEST_RATE * load,
            running=RUNNING * batch,
            waiting=waiting,
            kv_usage=min(0.99, max(kv, KV_USAGE * batch)),
            preemptions_per_s=preempt,
            ttft=Latency(0.12 * compute + queue / 4.0, 0.26 * compute + queue),
            itl=Latency(0.025 * itl_factor, 0.045 * itl_factor),
            queue=Latency(0.004 + queue / 4.0, 0.02 + queue),
        )

"""Inference-service fault kinds: KV-cache exhaustion and a traffic spike (workload layer).

Both are service-wide and leave the hardware healthy. They change what every vLLM replica of
the service reports (`ServiceEffect`, serving.py) and its log: KV usage near 100 % with
preemptions and their WARNING lines, or a request rate several times up with queueing while
KV usage stays moderate (DOMAIN.md §5.2).
"""

from __future__ import annotations

from simulator.fault_base import ActiveFault, FaultKind, ServiceEffect, WorkloadEffect


class KvCacheExhaustion(FaultKind):
    """Longer contexts than the KV cache was sized for: usage ~99 %, requests preempted and
    recomputed, a queue builds, TTFT and TPOT burn the SLO."""

    name = "kv_cache_exhaustion"
    layer = "workload"
    target = "workload"
    workload_kind = "inference"
    ends_on_drain = False

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        k = fault.intensity
        return [
            ServiceEffect(
                fault.window,
                workload=fault.workload,
                load=1.0 - 0.15 * k,
                kv_usage=0.5 + 0.49 * k,
                waiting=12.0 * k,
                queue_s=2.5 * k,
                preemptions_per_s=1.5 * k,
            )
        ]


class TrafficSpike(FaultKind):
    """Requests arrive 3-4x faster than usual: the request rate and queue time climb, TTFT
    burns the SLO, KV usage rises only to a normal-looking level."""

    name = "traffic_spike"
    layer = "workload"
    target = "workload"
    workload_kind = "inference"
    ends_on_drain = False

    def workload_effects(self, fault: ActiveFault) -> list[WorkloadEffect]:
        k = fault.intensity
        return [
            ServiceEffect(
                fault.window,
                workload=fault.workload,
                load=1.0 + 2.5 * k,
                waiting=40.0 * k,
                queue_s=6.0 * k,
            )
        ]


SERVING_FAULTS: tuple[FaultKind, ...] = (KvCacheExhaustion(), TrafficSpike())

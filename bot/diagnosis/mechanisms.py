"""Which fault mechanisms can produce which symptom (DOMAIN.md §4, §5, §6, §8). Pure: no I/O.

A finding can be the verdict only when its mechanism can explain the symptom that started the
run: a power cap slows a rank (~1.4x) but cannot stop collectives, so it never explains an NCCL
*hang*; a silent exporter explains no job symptom at all (it hides facts, it causes nothing).
Each check of a runbook names its mechanism (`mechanism:` on the step); each runbook's localize
step names the symptom it investigates (`localize: {symptom: hang}`). A mechanism not in this
catalog, or a run with no symptom (`/gpu diagnose <node>`), explains everything, so a runbook
that does not say keeps the plain bottom-up ranking.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Symptom(StrEnum):
    HANG = "hang"  # collectives stopped completing (NCCL watchdog timeout)
    SLOWDOWN = "slowdown"  # MFU drop, step time up
    LATENCY = "latency"  # TTFT/TPOT SLO breach of a serving workload
    ERRORS = "errors"  # ECC / XID / CUDA errors reported by the hardware
    NODE_LOST = "node_lost"  # a node or its GPUs gone (NotReady, alert storms)


class Role(StrEnum):
    CAUSE = "cause"  # a fault that produces symptoms
    DETECTOR = "detector"  # a detector silent or lying: a blind spot, never a cause
    SYMPTOM = "symptom"  # the symptom itself restated ("MFU is low", "no progress")


@dataclass(frozen=True)
class Mechanism:
    name: str
    symptoms: frozenset[Symptom]
    role: Role = Role.CAUSE
    """A detector explains nothing; a symptom finding explains only its own symptom."""
    note: str = ""
    """Why it cannot explain what it cannot (shown beside a side finding)."""


_H, _S, _L, _E, _N = (
    Symptom.HANG,
    Symptom.SLOWDOWN,
    Symptom.LATENCY,
    Symptom.ERRORS,
    Symptom.NODE_LOST,
)


def _m(name: str, *symptoms: Symptom, role: Role = Role.CAUSE, note: str = "") -> Mechanism:
    return Mechanism(name=name, symptoms=frozenset(symptoms), role=role, note=note)


_SLOWS = "slows its rank, cannot stop collectives"
_BLIND = "a silent detector hides facts, causes none"

MECHANISMS: dict[str, Mechanism] = {
    m.name: m
    for m in (
        # facility (DOMAIN §1.3, §6): clocks held down slow the work, nothing stops
        _m("power_brake", _S, _L, note=_SLOWS),
        _m("power_cap", _S, _L, note=_SLOWS),
        _m("thermal_slowdown", _S, _L, note=_SLOWS),
        _m("hw_slowdown", _S, _L, note=_SLOWS),
        # fabric (§3, §4.4): a sick link slows traffic; a down/flapping one exhausts retries
        _m("ib_link_errors", _H, _S, _E),
        _m("ib_link_flap", _H, _S, _E),
        _m("ib_port_down", _H, _S, _E),
        _m("ib_rate_degraded", _S, _L, note="a slower link slows collectives, never stops them"),
        _m("ib_receive_errors", _H, _S),
        _m("nvlink_errors", _H, _S, _E, _L),
        # gpu hardware (§2, §4.5): a dead CUDA context stops its rank
        _m("gpu_lost", _H, _S, _E, _L, _N),
        _m("hardware_xid", _H, _S, _E, _L),
        _m("row_remap_failure", _H, _E, _L),
        _m("ecc_sbe_storm", _E, note="correctable errors are an early warning, they stop nothing"),
        _m("pcie_degraded", _S, _L, note="a marginal PCIe link slows copies, stops nothing"),
        _m("gpu_errors_in_logs", _H, _S, _E, _L),
        # node software (§2, §8)
        _m("driver_skew", _H, _S, _E),
        _m("gsp_timeout", _H, _S, _E, _L),
        _m("driver_fault", _H, _S, _E, _L),
        # kubernetes (§7, §8)
        _m("gang_partial", _H),
        _m("tcp_fallback", _H, _S),
        _m("oom_killed", _H, _S, _E, _L),
        _m("crash_loop", _H, _E, _L),
        _m("node_not_ready", _H, _S, _L, _N),
        _m("gpus_unallocatable", _E, _N, note="only new scheduling is affected (§7)"),
        # telemetry (§1.5, §8): blind spots
        _m("detector_silent", role=Role.DETECTOR, note=_BLIND),
        _m("detector_stale", role=Role.DETECTOR, note="a frozen detector hides facts, causes none"),
        _m("dcp_missing", role=Role.DETECTOR, note="the MFU proxy is missing, not the GPUs"),
        # workload (§5.2, §6)
        _m("straggler", _H, _S),
        _m("checkpoint_stall", _H, _S),
        _m("dataloader_starvation", _S, note="every rank waits for input, collectives complete"),
        _m("kv_exhausted", _L),
        _m("traffic_spike", _L),
        _m("application_xid", _H, _E, _L),
        # the symptom restated: context, explains only itself
        _m("no_progress", _H, role=Role.SYMPTOM),
        _m("mfu_low", _S, role=Role.SYMPTOM),
        _m("slo_burn", _L, role=Role.SYMPTOM),
    )
}


def mechanism(name: str | None) -> Mechanism | None:
    """The catalog entry called `name` (None for no name or an unknown one)."""
    return MECHANISMS.get(name) if name else None


def explains(name: str | None, symptom: Symptom | None) -> bool:
    """Whether a finding of mechanism `name` can produce `symptom`. With no symptom, or a
    mechanism the catalog does not know, every finding may explain (the plain ranking)."""
    if symptom is None:
        return True
    found = mechanism(name)
    if found is None:
        return True
    return symptom in found.symptoms


def is_detector(name: str | None) -> bool:
    """A finding about a detector (silent, frozen), never about the hardware it watches."""
    found = mechanism(name)
    return found is not None and found.role is Role.DETECTOR


def why_not(name: str | None, symptom: Symptom) -> str:
    """A short phrase for a side finding: why it cannot be the cause of `symptom`."""
    found = mechanism(name)
    if found is not None and found.note:
        return found.note
    return f"cannot produce a {symptom.value.replace('_', ' ')}"

"""What the workloads' pods print, from the job and service models: verbatim NCCL, PyTorch and
vLLM formats (DOMAIN.md §4, §5.1).

A training pod logs NCCL's transport selection (`NET/IB : Using ...` or, without an RDMA
device, `NET/IB : No device found.` + `NET/Socket : Using [0]eth0`), a step line a minute while
the job moves, `Saving checkpoint` on rank 0, NCCL `NET/IB` WARN lines on the ranks next to a
sick link, and the PyTorch watchdog's timeout and progress-marker lines 600 s into a stall.
An inference pod logs vLLM's periodic stats and, when the KV cache runs out, preemptions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import datetime

from simulator.fault_base import JobEffect, LogLine, occurrences
from simulator.logs import POD_EVERY_S, POD_HISTORY_S
from simulator.piecewise import Periodic
from simulator.pods import SimPod
from simulator.serving import GENERATION_TOKENS, PROMPT_TOKENS, InferenceService
from simulator.topology import fraction, unit_hash
from simulator.training import CHECKPOINT_EVERY_S, NCCL_TIMEOUT_S, TrainingJob
from simulator.workloads import Workloads

Wall = Callable[[float], datetime]
IndexOf = Callable[[str], int]


def workload_lines(
    pod: SimPod, workloads: Workloads, *, until: float, wall: Wall, node_index: IndexOf
) -> list[LogLine] | None:
    """The pod's log up to `until`, or None when the pod belongs to no workload."""
    if pod.daemonset or pod.workload is None or pod.home is None:
        return None
    job, service = workloads.job(pod.workload), workloads.service(pod.workload)
    if job is None and service is None:
        return None
    if pod.node is None and pod.stopped_at is None:
        return []  # never placed: no container ever started
    stop = until if pod.stopped_at is None else min(until, pod.stopped_at)
    if job is not None and pod.home in job.ranks:
        return list(_TrainingLog(job, pod, stop=stop, wall=wall, index=node_index).lines())
    if service is not None and pod.home in service.replicas:
        return list(_serving_lines(service, pod.home, stop=stop, wall=wall))
    return []


class _TrainingLog:
    def __init__(
        self, job: TrainingJob, pod: SimPod, *, stop: float, wall: Wall, index: IndexOf
    ) -> None:
        self.job, self.pod, self.stop, self.wall, self.index = job, pod, stop, wall, index
        self.node = pod.home or ""
        self.rank = job.ranks[self.node] * max(pod.gpus, 1)
        self.begin = stop - POD_HISTORY_S
        self.prefix = f"{self.node}:{pod.pid}:{pod.pid + 57} [0]"

    def lines(self) -> Iterator[LogLine]:
        yield from self._transport(self.begin - 1.0)
        for effect in self.job.effects:
            restarted = self.begin < effect.window.start <= self.stop
            if effect.node == self.node and effect.transport == "Socket" and restarted:
                yield from self._transport(effect.window.start)
            yield from self._warnings(effect)
            yield from self._watchdog(effect)
        yield from self._steps()
        yield from self._checkpoints()

    def _transport(self, t: float) -> Iterator[LogLine]:
        rank = self.job.state(t).ranks.get(self.node) if self.job.ranks else None
        i = self.index(self.node)
        if rank is not None and rank.transport == "Socket":
            yield LogLine(t, f"{self.prefix} NCCL INFO NET/IB : No device found.")
            yield LogLine(
                t + 0.01, f"{self.prefix} NCCL INFO NET/Socket : Using [0]eth0:{_ip(i, 64)}<0>"
            )
            yield LogLine(t + 0.02, f"{self.prefix} NCCL INFO Using network Socket")
            return
        devices = " ".join(f"[{k}]mlx5_{k}:1/IB" for k in range(8))
        yield LogLine(
            t,
            f"{self.prefix} NCCL INFO NET/IB : Using {devices} [RO]; OOB ibp26s0:{_ip(i, 128)}<0>",
        )
        yield LogLine(t + 0.01, f"{self.prefix} NCCL INFO Using network IB")

    def _steps(self) -> Iterator[LogLine]:
        for k in range(int(POD_HISTORY_S // POD_EVERY_S), -1, -1):
            t = self.stop - k * POD_EVERY_S
            state = self.job.state(t)
            if state.step_rate == 0.0:
                continue
            step = math.floor(self.job.steps(t))
            r = state.ranks[self.node]
            loss = 2.1 + 0.2 * fraction(unit_hash(self.pod.name, step), 0)
            yield LogLine(
                t,
                f"[rank{self.rank}]: step {step} | loss {loss:.4f} | step_time "
                f"{r.step_time:.2f}s | tokens/s {r.tokens_per_s:.0f} | "
                f"data_wait {100 * state.data_wait:.0f}%",
            )

    def _warnings(self, effect: JobEffect) -> Iterator[LogLine]:
        if not effect.nccl_warn or effect.node is None or effect.node not in self.job.ranks:
            return
        sick = effect.node
        peers = _ring_peers(self.job, sick)
        if self.node != sick and self.node not in peers:
            return
        other = peers[-1] if self.node == sick else sick
        peer = f"{_ip(self.index(other), 128)}<{40000 + self.index(other) % 20000}>"
        every = 5.0 if effect.network == 0.0 else 120.0
        times = list(occurrences(effect.window, every_s=every, until=self.stop, first_s=1.0))
        if effect.network == 0.0:
            times = times[:3]  # the port is gone: the ring stops after the first failures
        for t in times:
            yield LogLine(
                t,
                f"{self.prefix} transport/net_ib.cc:1775 NCCL WARN NET/IB : Got completion "
                f"from peer {peer} with status=12 opcode=0 len=0 vendor err 129 (Recv)",
            )
        if effect.nccl_warn == "port_event" and self.node == sick:
            for t in occurrences(effect.window, every_s=40.0, until=self.stop):
                yield LogLine(
                    t + 0.5,
                    f"{self.prefix} transport/net_ib/common.cc:140 NCCL WARN NET/IB : "
                    f"{effect.hca}:1 Got non-fatal async event: port error(10)",
                )

    def _watchdog(self, effect: JobEffect) -> Iterator[LogLine]:
        stalls = effect.hang or effect.network == 0.0 or effect.behind
        fire = effect.window.start + NCCL_TIMEOUT_S
        if not stalls or fire > self.stop or not effect.window.active(fire):
            return
        if effect.hang == "init":
            yield from self._timeout(fire, seq=1, enqueued=1, completed=-1, op="BROADCAST")
            yield LogLine(fire, _DUMP)
            return
        # Each rank reports its own last completed work: equal on every rank when the network
        # or a lost peer stopped the ring, lower on a straggler (JobEffect.behind).
        done = int(self.job.last_completed(self.node, fire))
        yield from self._timeout(fire, seq=done + 1, enqueued=done + 1, completed=done)

    def _timeout(
        self, t: float, *, seq: int, enqueued: int, completed: int, op: str = "ALLREDUCE"
    ) -> Iterator[LogLine]:
        stamp = self.wall(t).strftime("%m%d %H:%M:%S.%f") + "000"
        numel = 131072000 if op == "BROADCAST" else 67108864
        ran = int(NCCL_TIMEOUT_S * 1000) + 81
        head = f"[rank{self.rank}]:[E{stamp} ProcessGroupNCCL.cpp"
        yield LogLine(
            t,
            f"{head}:632] [Rank {self.rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
            f"Timeout(ms)={int(NCCL_TIMEOUT_S * 1000)}) ran for {ran} milliseconds before "
            "timing out.",
        )
        yield LogLine(  # same time: the stable sort keeps the marker right after the timeout
            t,
            f"{head}:1664] [PG 0 Rank {self.rank}] Exception (either an error or timeout) "
            f"detected by watchdog at work: {seq}, last enqueued NCCL work: {enqueued}, "
            f"last completed NCCL work: {completed}.",
        )

    def _checkpoints(self) -> Iterator[LogLine]:
        if self.job.ranks.get(self.node) != 0:
            return
        stalls = [
            Periodic(e.window, CHECKPOINT_EVERY_S, e.checkpoint_s)
            for e in self.job.effects
            if e.checkpoint_s > 0
        ]
        k = math.ceil(self.begin / CHECKPOINT_EVERY_S)
        while k * CHECKPOINT_EVERY_S <= self.stop:
            t = k * CHECKPOINT_EVERY_S
            moving = self.job.state(t).step_rate > 0.0
            if moving and not any(p.window.active(t) for p in stalls):
                yield self._saving(t)
            k += 1
        for periodic in stalls:
            for begin in periodic.breaks(self.begin, self.stop)[::2]:
                if not self.begin <= begin <= self.stop:
                    continue
                yield self._saving(begin)
                fire = begin + NCCL_TIMEOUT_S
                if periodic.length_s > NCCL_TIMEOUT_S and fire <= self.stop:
                    done = int(self.job.last_completed(self.node, fire))
                    yield from self._timeout(fire, seq=done + 1, enqueued=done + 1, completed=done)

    def _saving(self, t: float) -> LogLine:
        step = math.floor(self.job.steps(t))
        return LogLine(
            t, f"[rank0]: Saving checkpoint at step {step} to /checkpoints/{self.job.name}"
        )


_DUMP = (
    "Received a dump signal due to a collective timeout from this local rank and we will try "
    "our best to dump the debug info. Last enqueued NCCL work: -1, last completed NCCL work: "
    "-1.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used "
    "across ranks, the order of collectives is not same for all ranks or the scheduled "
    "collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock "
    "or other reasons such as network errors or bugs in the communications library (e.g. NCCL), "
    "etc."
)


def _ip(index: int, subnet: int) -> str:
    """The node's address: 10.64.x.y on the host network, 10.128.x.y on IPoIB."""
    return f"10.{subnet}.{index // 256}.{index % 256}"


def _ring_peers(job: TrainingJob, node: str) -> list[str]:
    """The nodes before and after `node` in the job's ring (by rank)."""
    order = sorted(job.ranks, key=job.ranks.__getitem__)
    if len(order) < 2:
        return []
    i = order.index(node)
    return sorted({order[i - 1], order[(i + 1) % len(order)]} - {node}, key=order.index)


def _serving_lines(
    service: InferenceService, node: str, *, stop: float, wall: Wall
) -> Iterator[LogLine]:
    for k in range(int(POD_HISTORY_S // POD_EVERY_S), -1, -1):
        t = stop - k * POD_EVERY_S
        s = service.state(node, t)
        stamp = wall(t).strftime("%m-%d %H:%M:%S")
        yield LogLine(
            t,
            f"INFO {stamp} [loggers.py:123] Engine 000: Avg prompt throughput: "
            f"{s.request_rate * PROMPT_TOKENS:.1f} tokens/s, Avg generation throughput: "
            f"{s.request_rate * GENERATION_TOKENS:.1f} tokens/s, Running: {s.running:.0f} reqs, "
            f"Waiting: {s.waiting:.0f} reqs, GPU KV cache usage: {100 * s.kv_usage:.1f}%, "
            "Prefix cache hit rate: 63.0%",
        )
    for effect in service.effects:
        if effect.preemptions_per_s <= 0 or effect.node not in (None, node):
            continue
        for t in occurrences(effect.window, every_s=10.0, until=stop, first_s=10.0):
            if t < stop - POD_HISTORY_S:
                continue
            total = max(1, round(effect.preemptions_per_s * (t - effect.window.start)))
            stamp = wall(t).strftime("%m-%d %H:%M:%S")
            yield LogLine(
                t,
                f"WARNING {stamp} scheduler.py:1141] Sequence group {int(t) % 100000} is "
                "preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV "
                "cache space. This can affect the end-to-end performance. Increase "
                "gpu_memory_utilization or tensor_parallel_size to provide more KV cache "
                f"memory. total_num_cumulative_preemption={total}",
            )

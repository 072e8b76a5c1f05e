"""The simulated training job: how fast each rank runs a step, given the faults on its nodes.

Synchronous data-parallel training: every step each rank computes, waits for its input, then
all-reduces gradients over a ring, so the slowest rank's compute and the slowest link set the
whole job's pace. Healthy H100 numbers: 1.2 s per step (0.69 s compute, 0.45 s all-reduce at
~45e9 B/s busbw over 400G NDR, 5 % input wait), MFU 0.42, tensor-active 0.45. Faults act through
`JobEffect`s; this module turns them into per-rank readings at any fleet time. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from simulator.fault_base import JobEffect
from simulator.piecewise import Periodic, integrate, window_breaks, windows_key
from simulator.tracks import FaultWindow

STEP_S = 1.2
COMPUTE_S = 0.69
COMM_S = 0.45
DATA_WAIT = 0.05
BUSBW = 45e9
SOCKET_BUSBW = 5e9
TOKENS_PER_STEP = 49_500.0
"""Tokens each node's ranks process per step (41,250 tokens/s per node when healthy)."""
MFU = 0.42
TENSOR_ACTIVE = 0.45
TENSOR_PEAK = TENSOR_ACTIVE * STEP_S / COMPUTE_S
"""Tensor-pipe activity while computing; averaged over a step it reads TENSOR_ACTIVE."""
WORKS_PER_STEP = 24
"""NCCL works (all-reduce buckets, norms) per optimizer step: PyTorch's work sequence numbers."""
STEPS_AT_T0 = 120_000.0
CHECKPOINT_EVERY_S = 1200.0
CHECKPOINT_S = 25.0
NCCL_TIMEOUT_S = 600.0
STRAGGLER_SHARE = 0.25
"""Share of a rank's own extra compute that shows in its own step timer (the rest is the same
wait every rank sees), so a straggler reads a little slower than its peers."""
IB_PORT_BPS = 2.2e10
"""Bytes/s each HCA port receives while the job runs at full speed."""
CACHE_LIMIT = 200_000


@dataclass(frozen=True)
class RankState:
    """One rank's readings at one moment (the rank's node's worker)."""

    step_time: float
    tensor_active: float
    gpu_util: float
    busbw: float
    tokens_per_s: float
    mfu: float
    traffic: float
    """x IB_PORT_BPS on each of the node's HCA ports."""
    behind: int
    transport: str


@dataclass(frozen=True)
class JobState:
    """The whole job at one moment: every rank, plus whether it is moving at all."""

    ranks: Mapping[str, RankState]
    data_wait: float
    step_rate: float
    """Optimizer steps per second (0 while hung or stalled by a checkpoint save)."""
    hang: str
    hang_since: float
    checkpoint_s: float
    """Duration of the latest checkpoint save (elapsed while one runs)."""


class TrainingJob:
    """One training workload: its placed ranks (`node -> rank`) and the effects on it."""

    def __init__(
        self, name: str, *, ranks: Mapping[str, int], effects: Sequence[JobEffect]
    ) -> None:
        self.name = name
        self.ranks = dict(ranks)
        self.effects = [e for e in effects if e.node in self.ranks or e.node is None]
        self._checkpoints = [
            Periodic(e.window, CHECKPOINT_EVERY_S, e.checkpoint_s)
            for e in self.effects
            if e.checkpoint_s > 0
        ]
        self._cache: dict[tuple[object, ...], float] = {}
        self._states: dict[float, JobState] = {}
        self._readers: dict[tuple[str, ...], Callable[[float], float]] = {}
        self._generation = FaultWindow.closed

    @property
    def disturbed(self) -> bool:
        """Whether any fault touches the job (otherwise its readings are the healthy baseline)."""
        return bool(self.effects)

    def state(self, t: float) -> JobState:
        states = self._states
        if self._generation != FaultWindow.closed:
            states.clear()
            self._cache.clear()
            self._generation = FaultWindow.closed
        found = states.get(t)
        if found is None:
            if len(states) > CACHE_LIMIT:
                states.clear()  # bounded: a long-running fleet's memory stays flat
            found = states[t] = self._compute(t)
        return found

    def steps(self, t: float) -> float:
        """The job's step counter at `t` (what `training_steps_total` reads)."""
        key = ("steps", t, windows_key())
        found = self._cache.get(key)
        if found is None:
            found = STEPS_AT_T0 + integrate(
                lambda s: self.state(s).step_rate, start=0.0, end=t, breaks=self._breaks(0.0, t)
            )
            self._remember(key, found)
        return found

    def reader(
        self, key: tuple[str, ...], make: Callable[[], Callable[[float], float]]
    ) -> Callable[[float], float]:
        """One shared reading function per `key` (metric, node): the eight GPUs of a node read
        the same value, and a reader that is the same object is evaluated once per query."""
        found = self._readers.get(key)
        if found is None:
            found = self._readers[key] = make()
        return found

    def traffic_bytes(self, node: str, t: float, *, base: float) -> float:
        """One HCA port's received-bytes counter at `t`, from `base` at t0."""
        key = ("traffic", node, t, windows_key())
        found = self._cache.get(key)
        if found is None:
            found = IB_PORT_BPS * integrate(
                lambda s: self.state(s).ranks[node].traffic,
                start=0.0,
                end=t,
                breaks=self._breaks(0.0, t),
            )
            self._remember(key, found)
        return base + found

    def last_completed(self, node: str, t: float) -> float:
        state = self.state(t)
        if state.hang == "init":
            return -1.0
        return math.floor(self.steps(t)) * WORKS_PER_STEP - state.ranks[node].behind

    def _remember(self, key: tuple[object, ...], value: float) -> None:
        """Cache an integral; emptied when full, so a long-running fleet's memory stays flat."""
        if len(self._cache) > CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = value

    def _breaks(self, a: float, b: float) -> list[float]:
        lo, hi = min(a, b), max(a, b)
        out = window_breaks(e.window for e in self.effects)
        for periodic in self._checkpoints:
            out.extend(periodic.breaks(lo, hi))
        return out

    def _compute(self, t: float) -> JobState:
        active = [e for e in self.effects if e.window.active(t)]
        compute: dict[str, float] = {}
        network: dict[str, float] = {}
        behind: dict[str, int] = {}
        socket: set[str] = set()
        wait, hang, since = DATA_WAIT, "", math.inf
        for effect in active:
            for node in [effect.node] if effect.node else list(self.ranks):
                compute[node] = compute.get(node, COMPUTE_S) * effect.compute
                network[node] = network.get(node, 1.0) * effect.network
                behind[node] = behind.get(node, 0) + effect.behind
                if effect.transport == "Socket":
                    socket.add(node)
            wait = max(wait, effect.data_wait)
            if effect.hang or effect.network == 0.0:
                hang = "init" if "init" in (hang, effect.hang) else "collective"
                since = min(since, effect.window.start)
        slowest = max([COMPUTE_S, *compute.values()])
        # A dead link (network 0) is a hang, flagged above; the pace comes from the live links.
        narrowest = min([1.0, *(n for n in network.values() if n > 0.0)])
        step = (slowest + COMM_S / narrowest) / (1.0 - wait)
        stall = next((p.phase(t) for p in self._checkpoints if p.during(t)), None)
        checkpoint = self._checkpoint_s(t, stall)
        moving = not hang and stall is None
        ranks = {
            node: self._rank(
                node,
                step=step,
                wait=wait,
                moving=moving,
                elapsed=max(t - since, stall or 0.0),
                compute=compute,
                network=network,
                behind=behind.get(node, 0),
                socket=node in socket,
                hang=hang,
            )
            for node in self.ranks
        }
        return JobState(
            ranks=ranks,
            data_wait=wait,
            step_rate=1.0 / step if moving else 0.0,
            hang=hang,
            hang_since=since,
            checkpoint_s=checkpoint,
        )

    def _checkpoint_s(self, t: float, stall: float | None) -> float:
        if stall is not None:
            return max(stall, CHECKPOINT_S)
        lengths = [p.length_s for p in self._checkpoints if p.phase(t) is not None]
        return max([CHECKPOINT_S, *lengths])

    @staticmethod
    def _rank(
        node: str,
        *,
        step: float,
        wait: float,
        moving: bool,
        elapsed: float,
        compute: Mapping[str, float],
        network: Mapping[str, float],
        behind: int,
        socket: bool,
        hang: str,
    ) -> RankState:
        own = compute.get(node, COMPUTE_S)
        net = network.get(node, 1.0)
        step_time = step + STRAGGLER_SHARE * (own - COMPUTE_S)
        transport = "Socket" if socket else "IB"
        if not moving:
            return RankState(
                step_time=max(step_time, elapsed),
                tensor_active=0.0,
                gpu_util=0.0 if hang == "init" else 100.0,
                busbw=0.0,
                tokens_per_s=0.0,
                mfu=0.0,
                traffic=0.0,
                behind=behind,
                transport=transport,
            )
        return RankState(
            step_time=step_time,
            tensor_active=min(0.95, TENSOR_PEAK * own / step),
            gpu_util=100.0 * min(1.0, (1.0 - wait) / (1.0 - DATA_WAIT)),
            busbw=BUSBW * net,
            tokens_per_s=TOKENS_PER_STEP / step,
            mfu=MFU * STEP_S / step,
            traffic=0.0 if socket else (STEP_S / step) * min(net, 1.0),
            behind=behind,
            transport=transport,
        )

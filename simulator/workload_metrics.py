"""Series of the workloads: the training-job metrics contract (vLLM's are in vllm_metrics.py).

Training jobs export, from each node's worker (local rank 0), the metrics docs/signals.md
defines, labelled `job` (workload name), `node`, `rank` (global rank), `namespace`, `pod`.
Healthy series are closed-form lines; a disturbed job drives them from its model
(training.py). `OVERLAYS` make a disturbed job's GPU and IB series follow the job too
(tensor-active gaps, traffic). `WORKLOAD_METRICS` holds both workload families.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator import training
from simulator.metric_base import MetricDef, NodeView, Seed
from simulator.training import JobState, RankState, TrainingJob
from simulator.vllm_metrics import VLLM_METRICS

JobReading = Callable[[TrainingJob, str, float], float]
Healthy = tuple[float, float]


def _rank(read: Callable[[RankState], float]) -> JobReading:
    return lambda job, node, t: read(job.state(t).ranks[node])


def _job(read: Callable[[JobState], float]) -> JobReading:
    return lambda job, _node, t: read(job.state(t))


CHECKPOINT_AGE_AT_T0 = 780.0
"""Every simulated job saved its last checkpoint 13 min before the scenario's t0 (and saves
every CHECKPOINT_EVERY_S): old enough that draining at t0 would redo real work."""

#: metric -> (help, counter?, healthy (base, slope), model reading)
_JOB: dict[str, tuple[str, bool, Healthy, JobReading]] = {
    "training_step_time_seconds": (
        "Seconds the rank's last optimizer step took (the step in progress, when longer).",
        False,
        (training.STEP_S, 0.0),
        _rank(lambda r: r.step_time),
    ),
    "training_steps_total": (
        "Optimizer steps completed.",
        True,
        (training.STEPS_AT_T0, 1.0 / training.STEP_S),
        lambda job, _node, t: job.steps(t),
    ),
    "training_tokens_per_second": (
        "Tokens this node's ranks processed per second over the last reporting interval.",
        False,
        (training.TOKENS_PER_STEP / training.STEP_S, 0.0),
        _rank(lambda r: r.tokens_per_s),
    ),
    "training_mfu_ratio": (
        "Model FLOPs utilization over the last reporting interval (0-1).",
        False,
        (training.MFU, 0.0),
        _rank(lambda r: r.mfu),
    ),
    "training_mfu_baseline_ratio": (
        "The job's trailing 24 h median MFU at the same configuration.",
        False,
        (training.MFU, 0.0),
        lambda _job, _node, _t: training.MFU,
    ),
    "nccl_allreduce_busbw_bytes_per_second": (
        "NCCL all-reduce bus bandwidth of the rank's inter-node transport (0 while stalled).",
        False,
        (training.BUSBW, 0.0),
        _rank(lambda r: r.busbw),
    ),
    "training_dataloader_wait_ratio": (
        "Fraction of the step spent waiting for the next input batch.",
        False,
        (training.DATA_WAIT, 0.0),
        _job(lambda s: s.data_wait),
    ),
    "training_checkpoint_duration_seconds": (
        "Seconds the latest checkpoint save took (elapsed while one runs).",
        False,
        (training.CHECKPOINT_S, 0.0),
        _job(lambda s: s.checkpoint_s),
    ),
    "training_checkpoint_age_seconds": (
        "Seconds since the job's last completed checkpoint save.",
        False,
        (0.0, 0.0),  # always from the model: a sawtooth, reset at each save
        lambda _job, _node, t: (t + CHECKPOINT_AGE_AT_T0) % training.CHECKPOINT_EVERY_S,
    ),
    "training_nccl_last_completed_seq": (
        "Sequence number of the last completed NCCL work of the rank's default process group.",
        False,
        (0.0, 0.0),  # always from the model: a whole number of works
        lambda job, node, t: job.last_completed(node, t),
    ),
}


def _job_seeds(metric: str) -> Callable[[NodeView], list[Seed]]:
    _help, _counter, (base, slope), read = _JOB[metric]
    always = metric in ("training_nccl_last_completed_seq", "training_checkpoint_age_seconds")

    def seeds(view: NodeView) -> list[Seed]:
        placed = view.placed("training")
        if placed is None:
            return []
        workloads, placement = placed
        job = workloads.job(placement.workload.name)
        if job is None:
            return []
        node = view.spec.name
        labels = {
            "job": job.name,
            "node": node,
            "rank": str(placement.rank * max(placement.pod.gpus, 1)),
            "namespace": placement.pod.namespace,
            "pod": placement.pod.name,
        }
        computed = None
        if job.disturbed or always:
            computed = _bind(read, job, node)
        return [Seed(("job",), labels, base, slope, computed, placement.pod.stopped_at)]

    return seeds


def _bind(read: JobReading, job: TrainingJob, node: str) -> Callable[[float], float]:
    return lambda t: read(job, node, t)


def _job_metrics() -> list[MetricDef]:
    return [
        MetricDef(
            name=name,
            family="job",
            kind="counter" if counter else "gauge",
            help=help_,
            seeds=_job_seeds(name),
        )
        for name, (help_, counter, _healthy, _read) in _JOB.items()
    ]


#: The training-job contract's metrics and vLLM's, by name.
WORKLOAD_METRICS: dict[str, MetricDef] = {m.name: m for m in (*_job_metrics(), *VLLM_METRICS)}


# --- overlays: a disturbed training job drives its nodes' GPU and IB series -------------------

Overlay = Callable[[TrainingJob, str, Seed], Callable[[float], float]]


def _gpu_reading(read: Callable[[RankState], float]) -> Overlay:
    return lambda job, node, _seed: lambda t: read(job.state(t).ranks[node])


def _traffic(job: TrainingJob, node: str, seed: Seed) -> Callable[[float], float]:
    return lambda t: job.traffic_bytes(node, t, base=seed.base)


OVERLAYS: dict[str, Overlay] = {
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _gpu_reading(lambda r: r.tensor_active),
    "DCGM_FI_DEV_GPU_UTIL": _gpu_reading(lambda r: r.gpu_util),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _gpu_reading(lambda r: r.gpu_util / 100.0 * 0.97),
    "node_infiniband_port_data_received_bytes_total": _traffic,
    "node_infiniband_port_data_transmitted_bytes_total": _traffic,
}


def overlay(metric: str, view: NodeView, seed: Seed) -> Seed:
    """The seed, driven by the node's training job when a fault disturbs that job."""
    make = OVERLAYS.get(metric)
    placed = view.placed("training") if make is not None else None
    if make is None or placed is None:
        return seed
    workloads, placement = placed
    job = workloads.job(placement.workload.name)
    node = view.spec.name
    if job is None or not job.disturbed or node not in job.ranks:
        return seed
    reader = job.reader((metric, node, repr(seed.base)), lambda: make(job, node, seed))
    return seed._replace(computed=reader)

"""Which series of a node, and which exporter family writes it: the words fault kinds and metric
definitions share (fault_base.py below the workloads, metric_base.py above them)."""

from __future__ import annotations

from typing import Literal

Family = Literal["dcgm", "node_exporter", "kube_state_metrics", "scrape", "job", "vllm"]
EntityKey = tuple[str, ...]
"""Which series of a node: `("gpu", "5")`, `("hca", "0")`, `("condition", "Ready", "true")`."""

_GPU_ENTITIES = tuple(("gpu", str(i)) for i in range(64))
_HCA_ENTITIES = tuple(("hca", str(i)) for i in range(64))


def gpu_entity(index: int) -> EntityKey:
    """`("gpu", "5")`, shared rather than rebuilt for every series."""
    return _GPU_ENTITIES[index] if index < len(_GPU_ENTITIES) else ("gpu", str(index))


def hca_entity(index: int) -> EntityKey:
    return _HCA_ENTITIES[index] if index < len(_HCA_ENTITIES) else ("hca", str(index))

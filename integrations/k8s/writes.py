"""The adapter's writes: cordon, taints, labels, annotations, pod deletion, Jobs. Every name
is validated before any request and every write reads first, so a repeated write is
`Outcome.ALREADY_DONE`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from integrations.cluster import JobRun, Outcome
from integrations.errors import ClusterConflict, InvalidObject, PodNotFound
from integrations.k8s.permissions import CREATE_JOBS, DELETE_PODS, GET_PODS
from integrations.k8s.reads import read_job
from integrations.k8s.transport import Transport
from integrations.k8s_records import job_run
from integrations.names import (
    check_annotation_value,
    check_job_name,
    check_label_value,
    check_namespace,
    check_node_name,
    check_pod_name,
    check_qualified_key,
    check_taint_effect,
)

MERGE_PATCH = "application/merge-patch+json"
TaintChange = Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None]


def set_unschedulable(api: Transport, name: str, *, on: bool) -> Outcome:
    node = api.read_node(name)
    if bool(node.spec.unschedulable) == on:
        return Outcome.ALREADY_DONE
    api.patch_node(name, {"spec": {"unschedulable": True if on else None}})
    return Outcome.CHANGED


def taint(api: Transport, node: str, *, key: str, value: str, effect: str) -> Outcome:
    name = check_node_name(node)
    check_qualified_key(key, what="taint key")
    check_label_value(value, what="taint value")
    check_taint_effect(effect)

    def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        same = [t for t in taints if (t.get("key"), t.get("effect")) == (key, effect)]
        if same and (same[0].get("value") or "") == value:
            return None
        kept = [t for t in taints if (t.get("key"), t.get("effect")) != (key, effect)]
        return kept + [{"key": key, "effect": effect} | ({"value": value} if value else {})]

    return _rewrite_taints(api, name, change)


def untaint(api: Transport, node: str, *, key: str, effect: str) -> Outcome:
    name = check_node_name(node)
    check_qualified_key(key, what="taint key")
    check_taint_effect(effect)

    def change(taints: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        kept = [t for t in taints if (t.get("key"), t.get("effect")) != (key, effect)]
        return None if len(kept) == len(taints) else kept

    return _rewrite_taints(api, name, change)


def annotate(api: Transport, node: str, annotations: Mapping[str, str | None]) -> Outcome:
    for key, value in annotations.items():
        check_qualified_key(key, what="annotation key")
        if value is not None:
            check_annotation_value(value)
    return _merge_metadata(api, check_node_name(node), "annotations", annotations)


def label(api: Transport, node: str, labels: Mapping[str, str | None]) -> Outcome:
    for key, value in labels.items():
        check_qualified_key(key, what="label key")
        if value is not None:
            check_label_value(value)
    return _merge_metadata(api, check_node_name(node), "labels", labels)


def delete_pod(api: Transport, pod: str, namespace: str, *, grace: timedelta) -> Outcome:
    """Delete one pod (read first: gone or already terminating is ALREADY_DONE)."""
    name, ns = check_pod_name(pod), check_namespace(namespace)
    gone = Outcome.ALREADY_DONE
    try:
        current = api.send(
            GET_PODS,
            lambda: api.core.read_namespaced_pod(name, ns, _request_timeout=api.timeout),
            target=f"{ns}/{name}",
            missing=lambda: PodNotFound(name, ns),
        )
    except PodNotFound:
        return gone
    if current.metadata is not None and current.metadata.deletion_timestamp is not None:
        return gone
    seconds = max(0, int(grace.total_seconds()))
    try:
        api.send(
            DELETE_PODS,
            lambda: api.core.delete_namespaced_pod(
                name, ns, grace_period_seconds=seconds, _request_timeout=api.timeout
            ),
            target=f"{ns}/{name}",
            missing=lambda: PodNotFound(name, ns),
        )
    except PodNotFound:
        return gone
    return Outcome.CHANGED


def create_job(api: Transport, manifest: Mapping[str, Any]) -> JobRun:
    """POST the Job; a 409 (AlreadyExists: the same idempotency key ran before) reads the
    existing one instead, so a retry never starts a second Job."""
    meta = manifest.get("metadata") or {}
    name = check_job_name(str(meta.get("name", "")))
    ns = check_namespace(str(meta.get("namespace", "")))
    body: Any = dict(manifest)  # the client takes plain data for a V1Job
    try:
        created = api.send(
            CREATE_JOBS,
            lambda: api.batch.create_namespaced_job(ns, body, _request_timeout=api.timeout),
            target=f"{ns}/{name}",
        )
    except ClusterConflict:
        return read_job(api, name, ns)
    except ValueError as exc:  # the client's model check, before any request
        first = " ".join(str(exc).split())[:300]
        raise InvalidObject(f"job {ns}/{name} is not a valid batch/v1 Job: {first}") from exc
    return job_run(created, outcome=Outcome.CHANGED)


def _rewrite_taints(api: Transport, name: str, change: TaintChange) -> Outcome:
    """Read-modify-write of spec.taints guarded by metadata.resourceVersion: a 409 (someone
    else wrote the node in between) re-reads and tries again, `retries` times."""
    for attempt in range(api.retries + 1):
        node = api.read_node(name)
        serializer: Any = api.api
        taints = [serializer.sanitize_for_serialization(t) for t in node.spec.taints or []]
        wanted = change(taints)
        if wanted is None:
            return Outcome.ALREADY_DONE
        body = {
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": wanted},
        }
        try:
            api.patch_node(name, body, content_type=MERGE_PATCH)
        except ClusterConflict:
            if attempt == api.retries:
                raise
            continue
        return Outcome.CHANGED
    raise AssertionError("unreachable: the loop returns or raises")


def _merge_metadata(
    api: Transport, name: str, field: str, values: Mapping[str, str | None]
) -> Outcome:
    node = api.read_node(name)
    current = dict(getattr(node.metadata, field) or {})
    if all(current.get(k) == v for k, v in values.items()):
        return Outcome.ALREADY_DONE
    api.patch_node(name, {"metadata": {field: dict(values)}}, content_type=MERGE_PATCH)
    return Outcome.CHANGED

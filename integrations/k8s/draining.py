"""Drains go through the policy/v1 Eviction API only: a PodDisruptionBudget's refusal is
retried until the grace deadline, then reported per pod; nothing here ever deletes a pod to get
round a PDB."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from kubernetes import client

from integrations.cluster import DrainReport, Outcome
from integrations.errors import ClusterError, ClusterForbidden, EvictionBlocked, PodNotFound
from integrations.k8s.permissions import EVICT_PODS
from integrations.k8s.transport import Transport
from integrations.k8s.writes import set_unschedulable
from integrations.k8s_records import skip_reason
from integrations.names import check_node_name
from integrations.throttling import backoff_delay


def drain(api: Transport, node: str, *, grace: timedelta) -> DrainReport:
    """Cordon, then evict every pod but DaemonSet-owned, mirror and finished ones through
    the policy/v1 Eviction API. A PDB's 429 is retried with backoff until `grace` has
    passed, then the pod is reported in `blocked` with the API's reason. A pod already
    gone (404) or already terminating (an earlier drain's eviction) is left to finish, so
    a repeated drain is ALREADY_DONE. Never a DELETE."""
    name = check_node_name(node)
    cordoned = set_unschedulable(api, name, on=True)
    skipped, pending, reasons = [], [], {}
    for pod in api.pods_on(name):
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        why = skip_reason(pod)
        if pod.metadata.deletion_timestamp is not None:
            reasons[key] = "already terminating"
        elif why:
            skipped.append(pod.metadata.name)
            reasons[key] = why
        else:
            pending.append(pod)
    evicted, blocked = _evict_all(api, pending, grace=grace, reasons=reasons)
    changed = cordoned is Outcome.CHANGED or bool(evicted)
    return DrainReport(
        outcome=Outcome.CHANGED if changed else Outcome.ALREADY_DONE,
        evicted=tuple(evicted),
        skipped=tuple(skipped),
        blocked=tuple(blocked),
        reasons=reasons,
    )


def _evict_all(
    api: Transport, pods: list[Any], *, grace: timedelta, reasons: dict[str, str]
) -> tuple[list[str], list[str]]:
    deadline = api.clock() + grace.total_seconds()
    evicted: list[str] = []
    for attempt in itertools.count():
        refused = []
        for pod in pods:
            key = f"{pod.metadata.namespace}/{pod.metadata.name}"
            why = _evict(api, pod)
            if why is None:
                evicted.append(pod.metadata.name)
                reasons.pop(key, None)
            elif why == "gone":
                reasons[key] = "already gone (404)"
            else:
                reasons[key] = why
                refused.append(pod)
        pods = refused
        remaining = deadline - api.clock()
        if not pods or remaining <= 0:
            break
        api.sleep(min(remaining, backoff_delay(attempt, base=api.backoff, cap=5.0)))
    return evicted, [p.metadata.name for p in pods]


def _evict(api: Transport, pod: Any) -> str | None:
    """None when evicted, "gone" on 404, else why the Eviction API refused."""
    name, ns = pod.metadata.name, pod.metadata.namespace
    eviction = client.V1Eviction(
        api_version="policy/v1",
        kind="Eviction",
        metadata=client.V1ObjectMeta(name=name, namespace=ns),
    )
    try:
        api.send(
            EVICT_PODS,
            lambda: api.core.create_namespaced_pod_eviction(
                name, ns, eviction, _request_timeout=api.timeout
            ),
            target=f"{ns}/{name}",
            missing=lambda: PodNotFound(name, ns),
            retry_throttled=False,
        )
    except PodNotFound:
        return "gone"
    except EvictionBlocked as exc:
        return str(exc)
    except ClusterForbidden:
        raise
    except ClusterError as exc:
        if exc.retryable is False:
            raise
        return str(exc)
    return None

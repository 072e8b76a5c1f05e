"""`gpu-oncall cluster check`: does the configured identity hold every permission the bot needs?

Asks the API server (one SelfSubjectAccessReview per permission, through `Cluster`) about each
of `integrations.k8s.REQUIRED_PERMISSIONS`, the list `deploy/kubernetes/base/clusterrole.yaml`
grants, so an operator sees a missing RBAC rule before an incident does; with the node agent's
Job variant (`agent.mode: job`) also `JOB_PERMISSIONS` in the agent namespace (the Role in
deploy/kubernetes/node-agent/rbac.yaml). On the simulated cluster every permission is granted.
Rendering is here too: a table, or JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from bot.cli.terminal import Terminal
from bot.config import Settings
from integrations.cluster import Permission

CLUSTER_ROLE = "deploy/kubernetes/base/clusterrole.yaml"
AGENT_ROLE = "deploy/kubernetes/node-agent/rbac.yaml"


@dataclass(frozen=True)
class ClusterCheck:
    """The answer for each permission, and where it came from."""

    backend: str  # sim | kubernetes | slurm
    permissions: tuple[Permission, ...]
    identity: str = ""  # whom the API server authenticated (SelfSubjectReview)
    notes: tuple[str, ...] = ()  # what to know beyond them (Slurm 22.05: whose reads take turns)

    @property
    def missing(self) -> tuple[Permission, ...]:
        return tuple(p for p in self.permissions if not p.allowed)

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.backend,
            "identity": self.identity,
            "ok": self.ok,
            "permissions": [
                {
                    "verb": p.verb,
                    "resource": p.resource,
                    "subresource": p.subresource,
                    "group": p.group,
                    "namespace": p.namespace,
                    "allowed": bool(p.allowed),
                    "reason": p.reason,
                }
                for p in self.permissions
            ],
            "missing": [p.describe() for p in self.missing],
            "notes": list(self.notes),
            "cluster_role": CLUSTER_ROLE,
        }


def check_cluster(settings: Settings) -> ClusterCheck:
    """Ask the configured cluster; the simulated one grants everything without being built."""
    if settings.cluster == "slurm":
        return _check_slurm(settings)
    from integrations.k8s import JOB_PERMISSIONS, REQUIRED_PERMISSIONS

    needed = list(REQUIRED_PERMISSIONS)
    if settings.agent.chosen_mode() == "job":
        needed += [replace(p, namespace=settings.agent.namespace) for p in JOB_PERMISSIONS]
    if settings.cluster == "sim":
        granted = tuple(replace(p, allowed=True, reason="simulated") for p in needed)
        return ClusterCheck("sim", granted)
    from bot.wiring.runtime import make_cluster
    from integrations.k8s import KubernetesCluster

    cluster = make_cluster(settings, sim=None)
    who = cluster.identity() if isinstance(cluster, KubernetesCluster) else ""
    return ClusterCheck("kubernetes", tuple(cluster.check_permissions(needed)), identity=who)


def _check_slurm(settings: Settings) -> ClusterCheck:
    """Token, REST version, operator, and the scontrol calls (integrations/slurm/checking.py)."""
    from bot.wiring.slurm import make_slurm_cluster
    from integrations.slurm.checking import check_slurm, slurm_notes

    cluster = make_slurm_cluster(settings)
    try:
        rows = tuple(check_slurm(cluster))
        return ClusterCheck("slurm", rows, notes=tuple(slurm_notes(cluster)))
    finally:
        cluster.close()


def render_check(check: ClusterCheck) -> list[str]:
    """The table, then a verdict line that says what to do about anything missing."""
    lines = [f"Identity: {check.identity}"] if check.identity else []
    if check.backend == "sim":
        lines.append("Simulated cluster (GPU_ONCALL_CLUSTER=sim): it grants every permission.")
    lines.append(f"{'VERB':<8} {'RESOURCE':<28} {'GROUP':<18} ALLOWED")
    for p in check.permissions:
        what = p.resource + (f"/{p.subresource}" if p.subresource else "")
        what += f" in {p.namespace}" if p.namespace else ""
        shown = "yes" if p.allowed else "NO" + (f" ({p.reason})" if p.reason else "")
        lines.append(f"{p.verb:<8} {what:<28} {p.group or 'core':<18} {shown}")
    lines += [f"Note: {note}" for note in check.notes]
    if check.ok:
        lines.append(f"All {len(check.permissions)} permissions granted.")
        return lines
    missing = ", ".join(p.describe() for p in check.missing)
    if check.backend == "slurm":
        lines.append(
            f"{len(check.missing)} of {len(check.permissions)} checks failed: {missing}. "
            "See docs/slurm.md (an operator token, the bot running as root or SlurmUser) and "
            "run `gpu-oncall cluster check` again."
        )
        return lines
    roles = f"the ClusterRole in {CLUSTER_ROLE}"
    if any(p.namespace for p in check.missing):
        roles += f" and the node agent's Role in {AGENT_ROLE}"
    lines.append(
        f"{len(check.missing)} of {len(check.permissions)} permissions missing: {missing}. "
        f"Bind the identity to {roles} "
        "(kubectl apply -k deploy/kubernetes/base) and run `gpu-oncall cluster check` again."
    )
    return lines


def cluster_check(settings: Settings, term: Terminal, *, as_json: bool) -> int:
    """`gpu-oncall cluster check`: which permissions the bot needs the configured identity holds
    (SelfSubjectAccessReview per permission). Exit 0 when all are granted, 1 when some are not."""
    report = check_cluster(settings)
    if as_json:
        term.line(json.dumps(report.to_dict(), indent=2))
    else:
        for line in render_check(report):
            term.line(line)
    return 0 if report.ok else 1

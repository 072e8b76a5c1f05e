"""What `gpu-oncall cluster check` asks a Slurm cluster: is the token valid, which REST version
is served and which calls it has, is the token's user an operator, can the bot's own Unix user
run the `scontrol` calls (drain/resume on 22.05, requeue everywhere)?

Each answer is a `Permission` row (verb, resource, allowed, reason) so the check renders like
the Kubernetes one. Reads only: nothing here drains, requeues or cancels. Slurm grants node
updates and others' job cancels only to operators: root, SlurmUser, or AdminLevel=Operator
in accounting (slurmdbd), which only `sacctmgr` can tell.
"""

from __future__ import annotations

import os
import pwd
import re

from integrations.cluster import Permission
from integrations.errors import ClusterError
from integrations.slurm.cluster import SlurmCluster

_SLURM_USER = re.compile(r"^SlurmUser\s*=\s*(\S+?)\((\d+)\)", re.MULTILINE)
_ACCOUNTING = re.compile(r"^AccountingStorageType\s*=\s*(\S+)", re.MULTILINE)
#: REST versions of Slurm 22.05 and older, whose slurmctld two overlapping reads of one node
#: crash (docs/slurm.md, "Reads of one node take turns"): what `slurm_notes` says of the turns.
SLURM_22_05 = frozenset({"v0.0.37", "v0.0.38"})


def check_slurm(cluster: SlurmCluster) -> list[Permission]:
    """One row per thing the bot needs, in the order an operator would fix them."""
    rows: list[Permission] = []
    try:
        api = cluster.rest.api
    except ClusterError as exc:
        return [Permission("reach", "slurmrestd", allowed=False, reason=str(exc))]
    rows.append(
        Permission("serve", f"REST {api.version}", group="slurmrestd", allowed=True,
                   reason="served: " + ", ".join(api.served))
    )  # fmt: skip
    rows.append(_read(cluster, "nodes"))
    rows.append(_read(cluster, "jobs"))
    config = _config(cluster)
    operator = _operator(cluster.rest.user, config)
    rows.append(operator)
    local = _local_operator(config)
    node_update = (
        Permission("update", "nodes", group="slurmrestd", allowed=operator.allowed,
                   reason="POST node/{name}: " + (operator.reason or "operator token"))
        if api.node_update
        else Permission("update", "nodes", group="scontrol", allowed=local.allowed,
                        reason=f"REST {api.version} has no node update: scontrol; " + local.reason)
    )  # fmt: skip
    rows.append(node_update)
    rows.append(Permission("requeue", "jobs", group="scontrol", allowed=local.allowed,
                           reason="no REST version has requeue; " + local.reason))  # fmt: skip
    rows.append(Permission("cancel", "jobs", group="slurmrestd", allowed=operator.allowed,
                           reason="DELETE job/{id} of any user: " + operator.reason))  # fmt: skip
    return rows


def slurm_notes(cluster: SlurmCluster) -> list[str]:
    """What an operator should know about this cluster beyond the permissions (its REST version
    already detected by `check_slurm`; nothing when it was not reached)."""
    version = cluster.rest.detected
    if version is None or version.version not in SLURM_22_05:
        return []
    where = cluster.turns.path
    shared = (
        f"this host's bot processes take turns through {where}; run them all on this host"
        if where is not None
        else "only this process's reads take turns: set GPU_ONCALL_SLURM__TURNS_FILE so that "
        "every bot process of the host (replicas, the CLI) shares them"
    )
    return [
        f"REST {version.version} is Slurm 22.05 or older: two overlapping reads of one node "
        f"crash its slurmctld; {shared} (docs/slurm.md, \"Reads of one node take turns\")."
    ]


def _read(cluster: SlurmCluster, what: str) -> Permission:
    try:
        body = cluster.rest.slurm("GET", what, what=f"list {what}")
    except ClusterError as exc:
        return Permission("read", what, group="slurmrestd", allowed=False, reason=str(exc))
    if what == "nodes" and not body.get("nodes"):  # 22.05 may answer a bad token with []
        return Permission("read", what, group="slurmrestd", allowed=False,
                          reason="slurmrestd listed no nodes: an invalid or expired token?")
    return Permission("read", what, group="slurmrestd", allowed=True, reason="token valid")


def _config(cluster: SlurmCluster) -> str:
    try:
        return cluster.scontrol.run(["show", "config"])
    except ClusterError:
        return ""


def _operator(user: str, config: str) -> Permission:
    """Whether the token's user is an operator: root or SlurmUser; AdminLevel needs sacctmgr."""
    match = _SLURM_USER.search(config)
    slurm_user = match[1] if match else "?"
    if user in ("root", slurm_user):
        return Permission("operate", f"as {user}", group="token", allowed=True,
                          reason=f"{user} is {'root' if user == 'root' else 'SlurmUser'}")
    accounting = _ACCOUNTING.search(config)
    if accounting and accounting[1] != "accounting_storage/none":
        return Permission("operate", f"as {user}", group="token", allowed=None,
                          reason=f"`sacctmgr show user {user} format=adminlevel` must say Operator")
    return Permission(
        "operate", f"as {user}", group="token", allowed=False,
        reason=f"{user} is neither root nor SlurmUser ({slurm_user}) and without slurmdbd no "
        "user can be made an operator: mint the token for root or SlurmUser",
    )  # fmt: skip


def _local_operator(config: str) -> Permission:
    """Whether this process's Unix user (scontrol authenticates it through munge) may update
    nodes and requeue jobs: root or SlurmUser."""
    if not config:
        return Permission("run", "scontrol", allowed=False,
                          reason="`scontrol show config` failed: check slurm.scontrol/conf")
    uid = os.getuid()
    match = _SLURM_USER.search(config)
    name = pwd.getpwuid(uid).pw_name
    if uid == 0 or (match is not None and int(match[2]) == uid):
        return Permission("run", "scontrol", allowed=True, reason=f"runs as {name}")
    return Permission("run", "scontrol", allowed=False,
                      reason=f"runs as {name}: run the bot as root or SlurmUser")

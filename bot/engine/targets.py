"""A run's target checked before anything is recorded: a node a person names must exist in the
cluster, so a typo is refused in one line that names the closest real nodes, and no incident
(which would then sit `failed` in the listings and the MTTR figures) is ever opened for it.

Reads the cluster only; writes nothing. Shared by the CLI, Slack and the engine's own start.
"""

from __future__ import annotations

import difflib
import re

from bot.errors import NotFound
from integrations.cluster import Cluster
from integrations.errors import IntegrationError, NodeNotFound

CLOSEST = 3
"""How many similar node names the refusal suggests."""


class UnknownNodeError(NotFound):
    """The named node is not in the cluster (CLI exit 2; nothing was recorded)."""

    def __init__(self, node: str, closest: list[str]) -> None:
        hint = f"; closest: {', '.join(closest)}" if closest else ""
        super().__init__(f"unknown node '{node}': the cluster has no node of that name{hint}")
        self.node, self.closest = node, closest


def check_node_exists(cluster: Cluster, node: str) -> None:
    """Raise UnknownNodeError when `node` is not in the cluster. One read of that node; only a
    miss lists the cluster's nodes to suggest the closest names."""
    try:
        cluster.nodes([node])
    except NodeNotFound as exc:
        raise UnknownNodeError(node, closest_nodes(cluster, node)) from exc


def closest_nodes(cluster: Cluster, node: str) -> list[str]:
    """Up to CLOSEST node names like `node` (none when the cluster cannot be listed: the refusal
    still stands, it only loses its hint)."""
    try:
        names = [info.name for info in cluster.nodes(None)]
    except IntegrationError:
        return []
    by_key: dict[str, list[str]] = {}
    for name in names:
        by_key.setdefault(_key(name), []).append(name)
    keys = difflib.get_close_matches(_key(node), list(by_key), n=CLOSEST, cutoff=0.5)
    return [name for key in keys for name in by_key[key]][:CLOSEST]


def _key(name: str) -> str:
    """`name` with its numbers unpadded, so `gpu-node-3` is nearest to `gpu-node-03`."""
    return re.sub(r"\d+", lambda m: str(int(m.group())), name)

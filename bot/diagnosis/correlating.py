"""Cross-node correlation: when many nodes show the same fault at once and share a domain (a
rack, a leaf switch, a driver version), the domain is the culprit, not each node. Pure: no I/O.

Driven by data only: which labels name a domain for which layer comes from the runbook
(`localize: {correlate: ...}`), and each node's label values come from what the run gathered
(node labels from the Cluster, `DCGM_FI_DRIVER_VERSION` from dcgm-exporter). A group of
affected nodes collapses into its domain when it is big enough (`min_nodes`) and covers enough
of the domain's observed nodes (`min_share`), so two unrelated faults that happen to sit in the
same rack of eight are still reported node by node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bot.diagnosis.findings import Culprit
from bot.diagnosis.localizing import Verdict

#: Fewer affected nodes than this are never blamed on a shared domain.
MIN_NODES = 3
#: The affected nodes must be at least this fraction of the domain's observed nodes.
MIN_SHARE = 0.5

NodeLabels = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class Correlation:
    """Affected nodes that share one value of a domain label."""

    label: str
    value: str
    nodes: tuple[str, ...]
    observed: int
    """How many nodes the run saw carrying this value (affected or not)."""

    @property
    def share(self) -> float:
        return len(self.nodes) / self.observed if self.observed else 0.0

    def describe(self) -> str:
        return (
            f"{len(self.nodes)} of {self.observed} observed nodes with "
            f"{self.label}={self.value} show it"
        )


def shared_domains(
    affected: Sequence[str],
    node_labels: NodeLabels,
    *,
    label: str,
    min_nodes: int = MIN_NODES,
    min_share: float = MIN_SHARE,
) -> list[Correlation]:
    """Groups of `affected` nodes sharing a value of `label` that pass both thresholds,
    largest first. Nodes without the label never form a group."""
    groups: dict[str, list[str]] = {}
    for node in dict.fromkeys(affected):
        value = node_labels.get(node, {}).get(label)
        if value:
            groups.setdefault(value, []).append(node)
    observed: dict[str, int] = {}
    for labels in node_labels.values():
        value = labels.get(label)
        if value:
            observed[value] = observed.get(value, 0) + 1
    found = [
        Correlation(label=label, value=value, nodes=tuple(nodes), observed=observed[value])
        for value, nodes in groups.items()
        if len(nodes) >= min_nodes
    ]
    return sorted(
        (c for c in found if c.share >= min_share), key=lambda c: (-len(c.nodes), c.value)
    )


def correlate(
    verdict: Verdict,
    node_labels: NodeLabels,
    *,
    domains: Mapping[str, Sequence[str]],
    min_nodes: int = MIN_NODES,
    min_share: float = MIN_SHARE,
) -> Verdict:
    """Replace the verdict's per-node culprits by the domains they share, for the labels
    `domains` lists under the verdict's layer (tried in order). Nodes outside every group stay
    culprits on their own. A verdict with nothing to collapse is returned unchanged."""
    labels = domains.get(verdict.layer.value, ())
    nodes = [c.node for c in verdict.culprit_details if c.node]
    claimed: dict[str, Correlation] = {}
    for label in labels:
        free = [n for n in nodes if n not in claimed]
        for group in shared_domains(
            free, node_labels, label=label, min_nodes=min_nodes, min_share=min_share
        ):
            claimed.update((n, group) for n in group.nodes)
    if not claimed:
        return verdict
    groups = list(dict.fromkeys(claimed.values()))
    details = [
        *(Culprit(domain=g.value, domain_label=g.label) for g in groups),
        *(c for c in verdict.culprit_details if not c.node or c.node not in claimed),
    ]
    shared = "; ".join(g.describe() for g in groups)
    return replace(
        verdict,
        culprits=tuple(dict.fromkeys(c.name for c in details if c.name)),
        culprit_details=tuple(details),
        summary=f"{verdict.layer.value} fault shared across nodes ({shared}): {verdict.summary}",
    )

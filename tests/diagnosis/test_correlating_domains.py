"""Cross-node correlation: many affected nodes sharing a rack / leaf / driver become one culprit.

Covers: a whole rack of power-braked nodes collapses into the rack; a node outside the group
stays a culprit of its own; two faulty nodes in one rack stay separate (below min_nodes); a
group that is a small share of its domain stays per node; labels are only tried for the
verdict's layer; the driver version (a signal label) works like a node label; a verdict with
nothing to collapse is returned unchanged.
"""

from __future__ import annotations

from bot.diagnosis.correlating import correlate, shared_domains
from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Finding
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import Verdict, localize

RACK = "gpu-oncall.io/rack"
LEAF = "gpu-oncall.io/leaf-switch"
DOMAINS = {"facility": [RACK], "fabric": [LEAF], "node_software": ["DCGM_FI_DRIVER_VERSION"]}


def labels(count: int, per_rack: int = 8) -> dict[str, dict[str, str]]:
    return {
        f"gpu-node-{i:02d}": {RACK: f"rack-{i // per_rack:02d}", LEAF: f"leaf-{i // per_rack:02d}"}
        for i in range(count)
    }


def verdict_for(layer: Layer, nodes: list[str]) -> Verdict:
    finding = Finding(
        "check",
        layer,
        Severity.CRITICAL,
        "symptom",
        Culprit(node=nodes[0]),
        affected=tuple(nodes),
    )
    return localize([CheckOutcome("check", layer, CheckStatus.FIRED, finding)])


def test_a_whole_rack_of_braked_nodes_collapses_into_the_rack() -> None:
    rack = [f"gpu-node-{i:02d}" for i in range(24, 32)]
    verdict = correlate(verdict_for(Layer.FACILITY, rack), labels(64), domains=DOMAINS)
    assert verdict.layer is Layer.FACILITY
    assert verdict.culprits == ("rack-03",)
    assert verdict.culprit_details[0].domain_label == RACK
    assert "8 of 8 observed nodes" in verdict.summary


def test_a_node_outside_the_group_stays_a_culprit_of_its_own() -> None:
    nodes = [f"gpu-node-{i:02d}" for i in range(8, 16)] + ["gpu-node-40"]
    verdict = correlate(verdict_for(Layer.FABRIC, nodes), labels(64), domains=DOMAINS)
    assert set(verdict.culprits) == {"leaf-01", "gpu-node-40"}


def test_two_faulty_nodes_in_one_rack_stay_separate() -> None:
    nodes = ["gpu-node-01", "gpu-node-05"]
    verdict = correlate(verdict_for(Layer.FACILITY, nodes), labels(16), domains=DOMAINS)
    assert set(verdict.culprits) == set(nodes)


def test_a_small_share_of_a_large_domain_stays_per_node() -> None:
    nodes = ["gpu-node-00", "gpu-node-01", "gpu-node-02"]
    wide = labels(64, per_rack=32)
    assert shared_domains(nodes, wide, label=RACK) == []
    verdict = correlate(verdict_for(Layer.FACILITY, nodes), wide, domains=DOMAINS)
    assert set(verdict.culprits) == set(nodes)


def test_only_the_verdict_layers_labels_are_tried() -> None:
    rack = [f"gpu-node-{i:02d}" for i in range(8)]
    verdict = correlate(verdict_for(Layer.GPU_HARDWARE, rack), labels(16), domains=DOMAINS)
    assert set(verdict.culprits) == set(rack)


def test_a_shared_driver_version_is_the_culprit_of_a_node_software_fault() -> None:
    upgraded = [f"gpu-node-{i:02d}" for i in range(4, 10)]
    driver = {f"gpu-node-{i:02d}": {"DCGM_FI_DRIVER_VERSION": "550.54.15"} for i in range(32)}
    driver.update({n: {"DCGM_FI_DRIVER_VERSION": "560.28.03"} for n in upgraded})
    verdict = correlate(verdict_for(Layer.NODE_SOFTWARE, upgraded), driver, domains=DOMAINS)
    assert verdict.culprits == ("560.28.03",)


def test_nothing_to_collapse_returns_the_verdict_unchanged() -> None:
    verdict = verdict_for(Layer.FABRIC, ["gpu-node-03"])
    assert correlate(verdict, labels(16), domains=DOMAINS) is verdict

"""The coexistence rules (bot/actions/coexistence.py) on nodes as the Cluster port reports them.

Covers: the protected label (configurable) refuses; the medik8s opt-out label refuses; the
taints medik8s' maintenance, self-node and fence-agents remediators set refuse, naming the
taint; a cordon without the bot's marker refuses, naming a draino-style owner annotation when
there is one; the bot's own cordon is not a refusal; a node the bot cordoned for this incident
and that is schedulable again is a human override (cancel), but not for another incident, and
not before the cordon took effect (claim written, `cordoned-at` not yet); the bot uncordons
only nodes whose cordon it owns; the markers are named under the configured prefix.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.actions.coexistence import (
    BOT,
    Markers,
    human_override,
    refusal,
    uncordon_refusal,
)
from integrations.cluster import NodeInfo

MARKERS = Markers()
AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def node(
    *,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str | None] | None = None,
    taints: tuple[str, ...] = (),
) -> NodeInfo:
    return NodeInfo(
        name="gpu-node-03",
        ready=True,
        unschedulable=unschedulable,
        labels=labels or {},
        annotations={k: v for k, v in (annotations or {}).items() if v is not None},
        taints=taints,
    )


def ours(incident: str = "INC-7", *, done: bool = True) -> dict[str, str | None]:
    claim = MARKERS.cordon_claim(incident=incident, reason=f"{incident}: gpu_hardware")
    return claim | (MARKERS.cordon_done(at=AT) if done else {})


def test_a_schedulable_unmarked_node_may_be_acted_on() -> None:
    assert refusal(node(), MARKERS) is None
    assert human_override(node(), MARKERS, incident="INC-7") is None


def test_the_protected_label_refuses_and_its_name_is_a_setting() -> None:
    protected = node(labels={"gpu-oncall.io/protected": "true"})
    assert refusal(protected, MARKERS) == (
        "gpu-node-03 is protected (label gpu-oncall.io/protected=true)"
    )
    custom = Markers(protected_label="example.com/hands-off")
    assert refusal(protected, custom) is None
    reason = refusal(node(labels={"example.com/hands-off": "True"}), custom)
    assert reason is not None and "example.com/hands-off=true" in reason


def test_the_medik8s_opt_out_label_refuses() -> None:
    paused = node(labels={"remediation.medik8s.io/exclude-from-remediation": "true"})
    reason = refusal(paused, MARKERS)
    assert reason == (
        "gpu-node-03 is excluded from remediation "
        "(label remediation.medik8s.io/exclude-from-remediation=true)"
    )


@pytest.mark.parametrize(
    "taint",
    [
        "medik8s.io/drain:NoSchedule",
        "medik8s.io/remediation=self-node-remediation:NoExecute",
        "remediation.medik8s.io/fence-agents-remediation:NoExecute",
        "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute",
    ],
)
def test_another_remediators_taint_refuses_naming_the_taint(taint: str) -> None:
    reason = refusal(node(taints=(taint,)), MARKERS)
    assert reason == f"gpu-node-03 is being remediated by another controller (taint {taint})"


def test_a_foreign_cordon_refuses_and_names_its_owner_annotation() -> None:
    bare = refusal(node(unschedulable=True), MARKERS)
    assert bare == "gpu-node-03 was cordoned by someone else"
    draino = node(unschedulable=True, annotations={"draino/cordon-by": "draino"})
    assert refusal(draino, MARKERS) == (
        "gpu-node-03 was cordoned by someone else (draino/cordon-by=draino)"
    )


def test_the_bots_own_cordon_is_not_a_refusal() -> None:
    assert refusal(node(unschedulable=True, annotations=ours()), MARKERS) is None
    assert uncordon_refusal(node(unschedulable=True, annotations=ours()), MARKERS) is None


def test_a_human_uncordon_after_the_bots_cordon_cancels_this_incidents_actions() -> None:
    uncordoned = node(unschedulable=False, annotations=ours("INC-7"))
    reason = human_override(uncordoned, MARKERS, incident="INC-7")
    assert reason is not None and "uncordoned by someone else after INC-7 cordoned it" in reason
    assert human_override(uncordoned, MARKERS, incident="INC-9") is None


def test_a_claim_whose_cordon_never_happened_is_not_an_override() -> None:
    claimed = node(unschedulable=False, annotations=ours("INC-7", done=False))
    assert human_override(claimed, MARKERS, incident="INC-7") is None
    assert refusal(claimed, MARKERS) is None


def test_the_bot_uncordons_only_nodes_it_cordoned() -> None:
    reason = uncordon_refusal(node(unschedulable=True), MARKERS)
    assert reason == "gpu-node-03 was not cordoned by gpu-oncall"
    assert uncordon_refusal(node(unschedulable=False), MARKERS) is None


def test_markers_live_under_the_configured_prefix() -> None:
    markers = Markers(prefix="oncall.example.com")
    claim = markers.cordon_claim(incident="INC-7", reason="INC-7: gpu_hardware")
    assert claim == {
        "oncall.example.com/cordoned-by": BOT,
        "oncall.example.com/incident": "INC-7",
        "oncall.example.com/cordon-reason": "INC-7: gpu_hardware",
    }
    assert set(markers.released()) == {*claim, "oncall.example.com/cordoned-at"}
    assert all(v is None for v in markers.released().values())

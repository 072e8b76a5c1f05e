"""The escalation ladder from a GPU's fault history (issue 14, part 3).

Aspects: the sentence people read ("3rd XID 48 on this GPU in 30 days, after 2 resets"); the
rung for a first fault, a repeat or one reset, a third fault or two resets; facts outside 30
days, of another fault or another GPU, re-runs of this same incident, and another incident's
findings of the same episode (within the last hour: two alerts about one storm) do not count; the
culprit GPU's key is its UUID (from its own evidence row) and its fault the XID code there;
the proposals each rung produces, a retired reset on the RMA rung, and no duplicates.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.actions.registry import default_registry
from bot.diagnosis.findings import CheckOutcome, CheckStatus, Culprit, Evidence, Finding
from bot.diagnosis.history import CulpritGpu, GpuFact, Rung, climb, culprit_gpus, ordinal
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.localizing import Verdict, localize
from bot.engine.steps.reviewing import escalate

NOW = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
KEY = "GPU-5f3c0b8e-1d2a-4c6b-9e7f-0a1b2c3d4e5f"
GPU = CulpritGpu(KEY, "gpu-node-03", "5", KEY, "xid 48")


def seen(what: str, days: float, *, kind: str = "finding", incident: str | None = None) -> GpuFact:
    return GpuFact(KEY, kind, what, NOW - timedelta(days=days), incident=incident)


def test_the_third_xid_after_two_resets_is_an_rma() -> None:
    facts = [
        seen("xid 48", 21, incident="INC-3"),
        seen("gpu_reset", 21, kind="action"),
        seen("xid 48", 6, incident="INC-9"),
        seen("gpu_reset", 6, kind="action"),
    ]
    record = climb(GPU, facts, now=NOW, incident="INC-12")
    assert record.text == "3rd XID 48 on this GPU in 30 days, after 2 resets"
    assert (record.occurrences, record.resets, record.rung) == (3, 2, Rung.RMA)


def test_rungs_climb_with_repeats_and_resets() -> None:
    assert climb(GPU, [], now=NOW).rung is Rung.RESET
    assert climb(GPU, [], now=NOW).text == "1st XID 48 on this GPU in 30 days, no reset before"
    assert climb(GPU, [seen("xid 48", 3)], now=NOW).rung is Rung.DRAIN_RESET
    reset_once = climb(GPU, [seen("gpu_reset", 3, kind="action")], now=NOW)
    assert (reset_once.rung, reset_once.text.endswith("after 1 reset")) == (Rung.DRAIN_RESET, True)
    two_resets = [seen("gpu_reset", 3, kind="action"), seen("reboot", 1, kind="action")]
    assert climb(GPU, two_resets, now=NOW).rung is Rung.RMA


def test_a_concurrent_incident_about_the_same_storm_is_not_a_recurrence() -> None:
    minutes = 1 / (24 * 60)
    same_storm = [seen("xid 48", 5 * minutes, incident="INC-11")]
    assert climb(GPU, same_storm, now=NOW, incident="INC-12").occurrences == 1
    an_hour_and_more = [seen("xid 48", 65 * minutes, incident="INC-11")]
    assert climb(GPU, an_hour_and_more, now=NOW, incident="INC-12").occurrences == 2
    # an earlier incident counts once, even when it also found the fault minutes ago
    both = [seen("xid 48", 2, incident="INC-11"), seen("xid 48", 5 * minutes, incident="INC-11")]
    assert climb(GPU, both, now=NOW, incident="INC-12").occurrences == 1


def test_old_other_and_same_incident_facts_do_not_count() -> None:
    facts = [
        seen("xid 48", 31),  # outside the window
        seen("xid 79", 2),  # another fault
        GpuFact("GPU-other", "finding", "xid 48", NOW - timedelta(days=1)),
        seen("xid 48", 0.01, incident="INC-12"),  # an earlier run of this very incident
    ]
    assert climb(GPU, facts, now=NOW, incident="INC-12").occurrences == 1


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 103)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "103rd"
    ]


def test_the_culprit_gpu_is_keyed_by_its_uuid_and_blamed_for_its_xid() -> None:
    labels = {"node": "gpu-node-03", "gpu": "5", "UUID": KEY, "err_code": "48"}
    xid_row = Evidence("xid", "gpu.xid.last", 48.0, labels)
    finding = Finding(
        "xid_hw", Layer.GPU_HARDWARE, Severity.CRITICAL, "XID 48",
        Culprit(node="gpu-node-03", gpu="5"), evidence=(xid_row,),
    )
    bare = Finding(
        "gpu_missing", Layer.GPU_HARDWARE, Severity.CRITICAL, "GPU 2 gone",
        Culprit(node="gpu-node-04", gpu="2"),
    )
    verdict = localize(
        [CheckOutcome(f.check_id, f.layer, CheckStatus.FIRED, f) for f in (finding, bare)]
    )
    assert culprit_gpus(verdict) == [
        GPU,
        CulpritGpu("gpu-node-04/gpu2", "gpu-node-04", "2", None, "gpu_missing"),
    ]


def ladder_verdict(rung: Rung) -> Verdict:
    culprit = Culprit(node="gpu-node-03", gpu="5")
    finding = Finding("xid_hw", Layer.GPU_HARDWARE, Severity.CRITICAL, "XID 48", culprit)
    verdict = localize([CheckOutcome("xid_hw", Layer.GPU_HARDWARE, CheckStatus.FIRED, finding)])
    record = climb(GPU, [], now=NOW).to_dict() | {"rung": rung.value, "text": "2nd XID 48 ..."}
    return replace(verdict, history=(record,))


def proposal(action: str, **params: object) -> dict[str, Any]:
    return {"action": action, "target": "gpu-node-03", "params": dict(params)}


def test_each_rung_proposes_its_actions_once() -> None:
    actions = default_registry()
    given = [proposal("drain", grace_seconds=30), proposal("gpu_reset", gpu="5")]
    same, retired = escalate(ladder_verdict(Rung.RESET), list(given), actions=actions)
    assert (same, retired) == (given, [])

    cordon = [proposal("cordon")]
    added, retired = escalate(ladder_verdict(Rung.DRAIN_RESET), cordon, actions=actions)
    assert [(p["action"], p["params"]) for p in added] == [
        ("cordon", {}), ("drain", {}), ("gpu_reset", {"gpu": "5"})
    ]
    assert "escalation ladder: drain_reset" in str(added[-1]["reason"])

    rma, retired = escalate(ladder_verdict(Rung.RMA), list(given), actions=actions)
    assert [(p["action"], p["params"]) for p in rma] == [
        ("drain", {"grace_seconds": 30}), ("cordon", {}), ("open_ticket", {"queue": "rma"})
    ]
    assert [(w.action, w.target) for w in retired] == [("gpu_reset", "gpu-node-03")]
    assert "resets did not hold" in retired[0].reason

"""Block Kit rendering (bot.slack.blocks, answers, kit), pure: views in, blocks out.

Covers each message type: a running triage (progress, no buttons), a verdict waiting for
approval (evidence with values, ruled-out layers, missing signals, Approve/Reject/Dry run with
a confirm dialog and a JSON value naming the run, approvers and the two-person rule), approved /
rejected / expired decisions, resolution with MTTR, the dry-run banner, a failed run, the
thread reply; the command answers (incidents, one incident, MTTR table, runbooks, help, dry-run
preview). Limits: an incident with hundreds of findings and a very long progress stay within
50 blocks and 3,000 characters per section with a pointer to the full report, and `fit` never
drops the buttons. Data with `<`, `>` and `&` is escaped.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.incidents.views import EventView, IncidentView
from bot.slack import answers
from bot.slack.blocks import (
    ApprovalState,
    TriageView,
    details_blocks,
    thread_blocks,
    triage_blocks,
    triage_text,
)
from bot.slack.humans import mttr_blocks
from bot.slack.kit import Block, Line, context, fit, section

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RUN = "a" * 32


def incident(**changes: Any) -> IncidentView:
    base: dict[str, Any] = {
        "id": 7,
        "runbook": "ecc-storm",
        "target": "gpu-node-03",
        "target_kind": "node",
        "severity": "critical",
        "title": "GPUEccStorm on gpu-node-03",
        "state": "awaiting_approval",
        "created_at": T0,
        "fired_at": T0 - timedelta(minutes=10),
        "detected_at": T0,
    }
    return IncidentView(**(base | changes))


def finding(i: int, *, evidence: int = 2, summary: str = "") -> dict[str, Any]:
    return {
        "check_id": f"check_{i}",
        "layer": "gpu_hardware",
        "severity": "critical" if i == 0 else "warning",
        "summary": summary or f"GPU {i % 8} on gpu-node-03: {i} double-bit ECC errors/min",
        "culprit": {"node": "gpu-node-03", "gpu": str(i % 8)},
        "evidence": [
            {"source": "dbe", "what": "gpu.ecc.dbe_rate", "value": 4.0 + j, "labels": {"gpu": "5"}}
            for j in range(evidence)
        ],
    }


VERDICT = {
    "layer": "gpu_hardware",
    "confidence": 0.9,
    "culprits": ["gpu-node-03"],
    "culprit_details": [{"node": "gpu-node-03", "gpu": "5", "uuid": "GPU-127c"}],
    "findings": [finding(0)],
    "ruled_out": ["fabric", "kubernetes"],
    "missing_signals": ["gpu.row_remap.failure"],
    "summary": "gpu_hardware fault at gpu-node-03 / GPU 5",
}
PROPOSALS = (
    {"action": "cordon", "target": "gpu-node-03", "risk": "medium",
     "description": "cordon gpu-node-03", "reason": "Keep new work off"},
    {"action": "drain", "target": "gpu-node-03", "risk": "high",
     "description": "drain gpu-node-03 (grace_seconds=30)", "reason": "Evict workloads"},
)  # fmt: skip


def view(**changes: Any) -> TriageView:
    base: dict[str, Any] = {
        "incident": incident(),
        "runbook_title": "ECC error storm",
        "requester": "alertmanager",
        "run_id": RUN,
        "run_status": "awaiting_approval",
        "steps_total": 24,
        "steps_done": 21,
        "progress": (Line(".", "DBE rate: max 4"), Line("!", "GPU 5: 4 DBE/min")),
        "verdict": VERDICT,
        "proposals": PROPOSALS,
        "approval": ApprovalState(state="pending", expires_at=T0 + timedelta(minutes=30)),
        "approvers": ("S0ONCALL", "U0BOB"),
        "two_person_risks": ("high",),
        "previewable": frozenset({"cordon", "drain"}),
    }
    return TriageView(**(base | changes))


def text_of(blocks: list[Block]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def assert_within_limits(blocks: list[Block]) -> None:
    assert len(blocks) <= 50
    for block in blocks:
        text = block.get("text", {}).get("text", "")
        assert len(text) <= (150 if block["type"] == "header" else 3000)
        assert len(block.get("elements", [])) <= 10
        for element in block.get("elements", []):
            assert (
                len(element.get("text", "") if isinstance(element.get("text"), str) else "") <= 3000
            )
            assert len(element.get("value", "")) <= 2000
            confirm = element.get("confirm", {}).get("text", {}).get("text", "")
            assert len(confirm) <= 300


def buttons(blocks: list[Block]) -> list[Block]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_running_triage_shows_progress_and_no_buttons() -> None:
    blocks = triage_blocks(view(run_status="running", verdict=None, steps_done=2, approval=None))
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"]["text"] == ":red_circle: CRITICAL · INC-7 · ecc-storm · gpu-node-03"
    assert "*Running* 2/24 steps" in text_of(blocks)
    assert ":warning: GPU 5: 4 DBE/min" in text_of(blocks)
    assert buttons(blocks) == []


def test_verdict_with_evidence_and_approval_buttons() -> None:
    blocks = triage_blocks(view())
    text = text_of(blocks)
    assert blocks[1]["block_id"] == "verdict"  # the verdict first, under the header
    assert "*Verdict:* `gpu_hardware` (confidence 90%)" in text
    assert "*Culprit:* gpu-node-03 / GPU 5 / GPU-127c" in text
    assert "*Decision:* :raised_hand: `cordon`, `drain` await approval (expires 12:30 UTC)" in text
    assert "Started by Alertmanager".lower() in text.lower()
    assert "gpu.ecc.dbe_rate" not in text and "Ruled out" not in text  # in the thread
    details = text_of(details_blocks(view()))
    assert "`gpu.ecc.dbe_rate` = 4 (gpu=5)" in details
    assert "*Ruled out:* `fabric`, `kubernetes`" in details
    assert "*Missing signals:* `gpu.row_remap.failure`" in details
    approve, reject, dry_run = buttons(blocks)
    assert approve["text"]["text"] == "Approve all"
    assert [b["action_id"] for b in (approve, reject, dry_run)] == [
        "gpu_approve",
        "gpu_reject",
        "gpu_dry_run",
    ]
    assert approve["style"] == "primary" and reject["style"] == "danger"
    assert json.loads(approve["value"]) == {"run": RUN, "incident": "INC-7"}
    assert "(risk: high)" in approve["confirm"]["text"]["text"]
    assert "approvers: <!subteam^S0ONCALL>, <@U0BOB>" in text
    assert "two-person rule" in text and "Expires 12:30 UTC" in text
    assert triage_text(view()) == "INC-7 critical: ecc-storm on gpu-node-03: gpu_hardware (90%)"
    assert_within_limits(blocks)


def test_each_waiting_action_has_its_own_approve_button() -> None:
    blocks = triage_blocks(view())
    own = [b["accessory"] for b in blocks if "accessory" in b]
    assert [b["action_id"] for b in own] == ["gpu_approve_only:cordon", "gpu_approve_only:drain"]
    assert [json.loads(b["value"])["only"] for b in own] == ["cordon", "drain"]
    assert "(risk: high)" in own[1]["confirm"]["text"]["text"]
    text = text_of(blocks)
    assert "risk *high* (two-person)" in text and "risk *medium* —" in text
    single = triage_blocks(view(proposals=PROPOSALS[:1]))
    assert not [b for b in single if "accessory" in b]  # one action: Approve is its button
    assert buttons(single)[0]["text"]["text"] == "Approve"


def test_after_a_per_action_approval_the_rest_waits_with_its_own_expiry() -> None:
    at = T0 + timedelta(minutes=5)
    first = ApprovalState("approved", T0 + timedelta(minutes=30), "U0BOB", at, actions=("cordon",))
    rest = ApprovalState("pending", at + timedelta(minutes=30), actions=("drain",))
    blocks = triage_blocks(view(approval=rest, approvals=(first, rest)))
    text = text_of(blocks)
    assert "`drain` await approval (expires 12:35 UTC)" in text
    assert "Keep new work off · :white_check_mark: Approved by <@U0BOB> at 12:05 UTC" in text
    assert not [b for b in blocks if "accessory" in b]  # one action left: Approve decides it
    assert "(risk: high)" in buttons(blocks)[0]["confirm"]["text"]["text"]


def test_no_dry_run_button_when_no_action_supports_it() -> None:
    blocks = triage_blocks(view(previewable=frozenset()))
    assert [b["action_id"] for b in buttons(blocks)] == ["gpu_approve", "gpu_reject"]


def test_decisions_replace_the_buttons() -> None:
    at = T0 + timedelta(minutes=5)
    approved = ApprovalState("approved", T0 + timedelta(minutes=30), "U0BOB", at)
    blocks = triage_blocks(
        view(approval=approved, run_status="completed", results=(Line("+", "cordoned"),))
    )
    assert buttons(blocks) == []
    assert ":white_check_mark: Approved by <@U0BOB> at 12:05 UTC" in text_of(blocks)
    assert ":white_check_mark: cordoned" in text_of(blocks)
    rejected = ApprovalState("rejected", T0, "U0BOB", at, reason="job <is> checkpointing")
    text = text_of(triage_blocks(view(approval=rejected, run_status="rejected")))
    assert "Rejected by <@U0BOB> at 12:05 UTC: job &lt;is&gt; checkpointing" in text
    expired = ApprovalState("expired", T0 + timedelta(minutes=30))
    assert "Expired at 12:30 UTC: nothing was done" in text_of(
        triage_blocks(view(approval=expired, run_status="rejected"))
    )


def test_resolution_dry_run_banner_and_failure() -> None:
    resolved = incident(state="resolved", resolved_at=T0 + timedelta(minutes=20))
    assert "INC-7 resolved · MTTR 30m" in text_of(triage_blocks(view(incident=resolved)))
    assert "*Dry run*" in text_of(triage_blocks(view(dry_run=True)))
    failed = triage_blocks(view(run_status="failed", verdict=None))
    assert ":x: *Run failed* after 21/24 steps" in text_of(failed)


def test_thread_reply_lists_results_and_verification() -> None:
    approved = ApprovalState("approved", T0, "U0BOB", T0)
    blocks = thread_blocks(
        view(
            approval=approved,
            incident=incident(state="monitoring"),
            results=(Line("+", "gpu-node-03 cordoned"), Line("x", "drain failed")),
            verification=(Line("+", "Verification passed: gpu.ecc.dbe_rate = 0"),),
        )
    )
    text = text_of(blocks)
    assert "*Actions* (approved by <@U0BOB>)" in text
    assert ":white_check_mark: gpu-node-03 cordoned" in text and ":x: drain failed" in text
    assert "*Verification*" in text and "INC-7 is now *monitoring*." in text


def test_incident_with_many_findings_stays_within_limits() -> None:
    long = "x" * 5000
    many = dict(VERDICT, findings=[finding(i, evidence=40, summary=long) for i in range(300)])
    progress = tuple(Line(".", f"step {i}: " + "y" * 200) for i in range(400))
    blocks = triage_blocks(view(verdict=many, progress=progress))
    assert_within_limits(blocks)
    details = details_blocks(view(verdict=many, progress=progress))
    assert_within_limits(details)
    text = text_of(details)
    assert "+290 more findings; full report: `/gpu incident INC-7`" in text
    assert "… 35 more values" in text
    assert "x" * 499 + "…" in text  # a 5,000-character summary, clipped
    assert [b["action_id"] for b in buttons(blocks)][:2] == ["gpu_approve", "gpu_reject"]
    assert "x" * 5000 not in text_of(blocks)
    running = triage_blocks(view(verdict=None, run_status="running", progress=progress))
    assert_within_limits(running)
    assert "earlier steps" in text_of(running) and "step 399" in text_of(running)


def test_fit_keeps_the_buttons_and_says_what_was_dropped() -> None:
    blocks = [section(f"block {i}") for i in range(80)]
    blocks.insert(40, {"type": "actions", "elements": [{"type": "button", "value": "v"}]})
    blocks.append(context(["footer"]))
    fitted = fit(blocks, pointer="full report: here")
    assert len(fitted) == 50
    assert fitted[-2]["type"] == "actions" and fitted[-1] == context(["footer"])
    assert "33 more blocks omitted; full report: here" in text_of(fitted)
    (long,) = fit([section("z" * 5000)], pointer="full report: here")
    assert len(long["text"]["text"]) == 3000
    assert long["text"]["text"].endswith("… (truncated; full report: here)")


def test_command_answers() -> None:
    views = [incident(id=i, title=f"t<{i}>") for i in range(1, 26)]
    listing = answers.incidents_blocks(views, include_resolved=False)
    assert "*Open incidents* (25)" in text_of(listing) and "t&lt;1&gt;" in text_of(listing)
    assert "5 more not shown" in text_of(listing)
    assert "No open incidents" in text_of(answers.incidents_blocks([], include_resolved=False))
    events = [EventView(T0, "finding", "bot", "GPU 5: 4 DBE/min")] * 30
    detail = text_of(answers.incident_blocks(incident(acknowledged_by="U0BOB"), events))
    assert "acknowledged by <@U0BOB>" in detail and "… 15 earlier events" in detail
    assert "MTTD 10m" in detail
    empty = text_of(mttr_blocks("7d", [], by="runbook"))
    assert "No incident was resolved in the last 7d" in empty
    rows = [answers.RunbookRow("ecc-storm", "ECC error storm", ("GPUEccStorm",), ("ecc",))]
    assert "`/gpu ecc`" in text_of(answers.runbooks_blocks(rows))
    help_text = text_of(answers.help_blocks((("help", "this list"),), {"ecc": "ecc-storm"}))
    assert "`/gpu ecc <target> [key=value ...]`  runs `ecc-storm`" in help_text
    preview = text_of(answers.preview_blocks("INC-7", [Line(".", "cordon gpu-node-03: ...")]))
    assert "Dry run for INC-7: nothing was changed" in preview

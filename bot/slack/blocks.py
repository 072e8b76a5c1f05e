"""Block Kit rendering of the live triage message and its thread reply. Pure: a TriageView in,
JSON-ready blocks out; no Slack client, no database. Limits are enforced by `kit.fit`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.actions.impact import render_impact
from bot.diagnosis.units import format_reading
from bot.engine.summaries import format_number
from bot.incidents.mttr import TimestampOrderError, format_duration
from bot.incidents.views import IncidentView
from bot.slack import messages
from bot.slack.kit import (
    MAX_BUTTON_VALUE,
    MAX_FALLBACK_TEXT,
    MAX_SECTION_TEXT,
    Block,
    Line,
    button,
    clip,
    context,
    escape,
    fit,
    render_line,
    section,
)
from bot.slack.messages import mention

MAX_FINDING_SECTIONS = 10
MAX_EVIDENCE_LINES = 5
MAX_EVIDENCE_CHARS = 160
MAX_SUMMARY_CHARS = 500
ACTION_IDS = {
    "approve": "gpu_approve",
    "approve_only": "gpu_approve_only",
    "reject": "gpu_reject",
    "dry_run": "gpu_dry_run",
    "drain_now": "gpu_drain_now",
    "drain_cancel": "gpu_drain_cancel",
}
"""Block Kit action ids; a per-action button's id is `gpu_approve_only:<action>`."""

_SEVERITY = {"critical": ":red_circle:", "warning": ":large_orange_circle:"}


@dataclass(frozen=True)
class ApprovalState:
    state: str  # pending | approved | rejected | expired
    expires_at: datetime
    actor: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    actions: tuple[str, ...] = ()
    """The actions this approval decided (or asks for); empty: every proposed action."""


@dataclass(frozen=True)
class TriageView:
    """Everything a triage message shows; built from the database by `snapshots.py`."""

    incident: IncidentView
    runbook_title: str
    requester: str
    run_id: str | None = None
    run_status: str | None = None
    steps_total: int = 0
    steps_done: int = 0
    progress: tuple[Line, ...] = ()
    verdict: Mapping[str, Any] | None = None
    proposals: tuple[Mapping[str, Any], ...] = ()
    approval: ApprovalState | None = None
    approvers: tuple[str, ...] = ()
    two_person_risks: tuple[str, ...] = ()
    policy_overrides: tuple[str, ...] = ()
    """What the runbook's own policy changed from the settings' defaults (named, never silent)."""
    dry_run: bool = False
    previewable: frozenset[str] = frozenset()
    results: tuple[Line, ...] = ()
    verification: tuple[Line, ...] = ()
    page_url: str | None = None
    """The incident's page (`pages.base_url`), linked beside the pointer when set."""
    page_auth: str = "token"
    """How the page asks who is reading (`pages.auth`, or `signed`), said beside the link."""
    page_until: datetime | None = None
    """When a signed link stops opening the page."""
    approvals: tuple[ApprovalState, ...] = ()
    """Every approval of the run, oldest first: more than one after a per-action approval."""
    waiting_drains: tuple[str, ...] = ()
    """A drain approved to run after the job's next checkpoint and waiting for it (its
    timeline line, bot/engine/deferred.py): the message offers to drain now or cancel."""

    @property
    def pointer(self) -> str:
        text = messages.FULL_REPORT.format(ref=self.incident.ref)
        link = messages.incident_page_link(
            self.incident.ref, self.page_url, self.page_auth, self.page_until
        )
        return f"{text} | {link}" if link else text

    @property
    def where_details(self) -> str:
        """Where the findings and the full report are, without repeating the incident id."""
        return messages.where_details(
            self.page_url, self.page_auth, self.page_until, thread=bool(self.verdict)
        )

    @property
    def pending_actions(self) -> tuple[str, ...]:
        """The action names waiting for a decision now (none unless an approval is pending)."""
        approval = self.approval
        if approval is None or approval.state != "pending":
            return ()
        names = [str(p.get("action")) for p in self.proposals]
        return approval.actions or tuple(dict.fromkeys(names))

    @property
    def decided_actions(self) -> dict[str, ApprovalState]:
        """After a per-action approval: each decided action and the approval that decided it."""
        if len(self.approvals) < 2:
            return {}
        return {a: row for row in self.approvals if row.state != "pending" for a in row.actions}


# -- the triage message ---------------------------------------------------------------------------


def triage_blocks(view: TriageView) -> list[Block]:
    """What a person woken at 3 a.m. reads first: the verdict, the culprit and the decision;
    then each proposed action once (risk, and a button of its own while several wait), the
    impact and recommendation once, Approve all / Reject / Dry run, who may approve. Findings,
    evidence and ruled-out layers are in the thread (`details_blocks`) and on the page."""
    blocks = [_header(view)]
    if view.dry_run:
        blocks.append(section(messages.DRY_RUN_BANNER))
    if view.verdict and view.run_status != "running":
        blocks.append(section(_verdict_head(view), block_id="verdict"))
        blocks += _proposals(view)
    else:
        blocks.append(section(_progress(view), block_id="progress"))
    if view.incident.state == "resolved":
        blocks.append(section(_resolved(view.incident)))
    blocks.append(context([_subtitle(view), view.where_details]))
    return fit(blocks, pointer=view.pointer)


def triage_text(view: TriageView) -> str:
    """The notification/fallback text of a triage message."""
    inc = view.incident
    text = f"{inc.ref} {escape(inc.severity)}: {escape(inc.runbook)} on {escape(inc.target)}"
    if view.verdict:
        layer = escape(str(view.verdict.get("layer")))
        text += f": {layer} ({_percent(view.verdict.get('confidence'))})"
    return clip(text, MAX_FALLBACK_TEXT, pointer=view.pointer)


def details_blocks(view: TriageView) -> list[Block]:
    """The thread reply under a verdict: the summary, every finding with its evidence, the
    ruled-out layers, missing signals and detector notes, and where the full report is."""
    if not view.verdict:
        return []
    verdict = view.verdict
    summary = escape(clip(str(verdict.get("summary", "")), MAX_SUMMARY_CHARS))
    blocks = [section(f"{messages.DETAILS}\n{summary}".rstrip(), block_id="details")]
    blocks += _findings(verdict, view.pointer)
    blocks.append(context([view.pointer]))
    return fit(blocks, pointer=view.pointer)


def details_text(view: TriageView) -> str:
    """The notification text of the details reply."""
    findings = list((view.verdict or {}).get("findings", []))
    return messages.details_summary(view.incident.ref, len(findings))


def thread_blocks(view: TriageView) -> list[Block]:
    """The reply in the message's thread once the actions ran: results, verification, state."""
    approval = view.approval
    decision, actor = (approval.state, approval.actor) if approval else ("approved", "policy")
    lines = [messages.actions_title(decision, actor or "bot")]
    lines += [render_line(line) for line in view.results] or [messages.NOTHING_DONE]
    blocks = [section("\n".join(lines))]
    if view.verification:
        lines = [render_line(line) for line in view.verification]
        text = "\n".join([messages.VERIFICATION, *lines])
        blocks.append(section(text))
    state = messages.now_in_state(view.incident.ref, view.incident.state)
    if view.incident.state == "resolved":
        state = _resolved(view.incident)
    blocks.append(context([state]))
    return fit(blocks, pointer=view.pointer)


def _header(view: TriageView) -> Block:
    inc = view.incident
    icon = _SEVERITY.get(inc.severity, ":large_blue_circle:")
    text = f"{icon} {inc.severity.upper()} · {inc.ref} · {inc.runbook} · {inc.target}"
    return {"type": "header", "text": {"type": "plain_text", "text": text, "emoji": True}}


def _subtitle(view: TriageView) -> str:
    inc = view.incident
    text = (
        f"{escape(view.runbook_title)} · state *{escape(inc.state)}* · "
        f"started by {messages.started_by(view.requester)}"
    )
    if inc.acknowledged_by:
        text += f" · acknowledged by {mention(inc.acknowledged_by)}"
    if view.verdict and view.run_status != "running":
        text += " · " + _checked(view)
    return text


def _checked(view: TriageView) -> str:
    done = f"{view.steps_done}/{view.steps_total}" if view.steps_total else str(view.steps_done)
    findings = sum(1 for line in view.progress if line.icon == "!")
    missing = sum(1 for line in view.progress if line.icon == "?")
    return messages.checked(done, findings=findings, unknown=missing)


def _progress(view: TriageView) -> str:
    done = f"{view.steps_done}/{view.steps_total}" if view.steps_total else str(view.steps_done)
    if view.run_status == "failed":
        return messages.run_failed(done, view.pointer)
    head = messages.running(done)
    if not view.progress:
        return (
            head
            + "\n"
            + messages.STARTING.format(
                runbook=escape(view.incident.runbook), target=escape(view.incident.target)
            )
        )
    # Keep the newest lines: the reader wants to see what just finished.
    body = [render_line(line) for line in view.progress]
    while len("\n".join([head, *body])) > MAX_SECTION_TEXT - 40 and len(body) > 1:
        body.pop(0)
    hidden = len(view.progress) - len(body)
    if hidden:
        body.insert(0, messages.earlier_steps(hidden))
    return "\n".join([head, *body])


def _verdict_head(view: TriageView) -> str:
    """Verdict, culprit and decision: three lines, each identifier once."""
    verdict = view.verdict or {}
    lines = [
        messages.VERDICT.format(
            layer=escape(str(verdict.get("layer"))), confidence=_percent(verdict.get("confidence"))
        ),
        messages.CULPRIT.format(culprit=escape(_culprits(verdict))),
        messages.DECISION.format(decision=_decision_now(view)),
    ]
    detectors = list(verdict.get("detectors", []))
    if detectors:
        lines.append(messages.DETECTOR.format(note=escape(str(detectors[0]))))
    return "\n".join(lines)


def _decision_now(view: TriageView) -> str:
    """What is decided, or what waits for a decision, in one line."""
    if view.run_status == "failed":
        return messages.run_failed_short()
    if not view.proposals:
        return messages.NO_ACTION
    approval = view.approval
    pending = view.pending_actions
    if pending:
        assert approval is not None
        return messages.awaiting(pending, approval.expires_at)
    if approval is None:
        return messages.NOT_ASKED
    return _decision(approval)


def _findings(verdict: Mapping[str, Any], pointer: str) -> list[Block]:
    blocks: list[Block] = []
    findings = list(verdict.get("findings", []))
    for finding in findings[:MAX_FINDING_SECTIONS]:
        blocks.append(section(_finding(finding), block_id=None))
    if len(findings) > MAX_FINDING_SECTIONS:
        more = len(findings) - MAX_FINDING_SECTIONS
        blocks.append(context([messages.more_findings(more, pointer)]))
    ruled = ", ".join(f"`{escape(str(x))}`" for x in verdict.get("ruled_out", [])) or "none"
    missing = ", ".join(f"`{escape(str(x))}`" for x in verdict.get("missing_signals", []))
    labels = [
        messages.RULED_OUT.format(layers=ruled),
        messages.MISSING.format(signals=missing or "none"),
    ]
    unknown = ", ".join(f"`{escape(str(x))}`" for x in verdict.get("unknown_layers", []))
    if unknown:
        labels.insert(1, messages.UNKNOWN_LAYERS.format(layers=unknown))
    labels += [messages.DETECTOR.format(note=escape(n)) for n in verdict.get("detectors", [])[:3]]
    blocks.append(context(labels))
    return blocks


def _finding(finding: Mapping[str, Any]) -> str:
    tag = f"*[{escape(str(finding.get('severity')))} · {escape(str(finding.get('layer')))}]*"
    head = f"{tag} {escape(clip(str(finding.get('summary')), MAX_SUMMARY_CHARS))}"
    evidence = list(finding.get("evidence", []))
    lines = [head]
    for ev in evidence[:MAX_EVIDENCE_LINES]:
        labels = ", ".join(
            f"{k}={v}" for k, v in dict(ev.get("labels", {})).items() if k not in ("node",)
        )
        where = f" ({escape(labels)})" if labels else ""
        lines.append(f"    • `{escape(str(ev.get('what')))}` = {_reading(ev)}{where}")
    if len(evidence) > MAX_EVIDENCE_LINES:
        lines.append("    • " + messages.more_values(len(evidence) - MAX_EVIDENCE_LINES))
    return "\n".join(lines)


def _culprits(verdict: Mapping[str, Any]) -> str:
    details = verdict.get("culprit_details") or []
    if not details:
        return ", ".join(str(c) for c in verdict.get("culprits", [])) or "none"
    parts = []
    for c in details:
        part = " / ".join(
            str(x)
            for x in (
                c.get("node") or c.get("workload") or c.get("pod") or c.get("domain") or "?",
                f"GPU {c['gpu']}" if c.get("gpu") not in (None, "") else None,
                c.get("uuid"),
                f"HCA {c['hca']}" if c.get("hca") else None,
            )
            if x
        )
        parts.append(part)
    return "; ".join(dict.fromkeys(parts))


def _proposals(view: TriageView) -> list[Block]:
    """Each proposed action once: its risk, its reason, and its state or its own button; then
    the impact and the recommendation once; then the buttons for all and who may approve."""
    if not view.proposals:
        return []
    pending = view.pending_actions
    own_buttons = len(pending) > 1 and view.run_status == "awaiting_approval"
    blocks: list[Block] = [section(messages.PROPOSED)]
    for name, group in _by_action(view.proposals):
        lines = [_proposal_line(view, p) for p in group]
        decided = view.decided_actions.get(name)
        if decided is not None:
            lines[-1] += " · " + _decision(decided)
        block = section("\n".join(lines), block_id=f"action:{name}"[:255])
        if own_buttons and name in pending:
            block["accessory"] = _approve_one(view, name, group)
        blocks.append(block)
    notes = _impact_lines(view)
    if notes:
        blocks.append(section("\n".join(escape(line) for line in notes), block_id="impact"))
    approval = view.approval
    if approval is None:
        return blocks
    if pending and view.run_status == "awaiting_approval":
        blocks.append(_buttons(view))
        blocks.append(context([_who_may_approve(view, approval)]))
    elif view.results:
        text = "\n".join(render_line(line) for line in view.results)
        blocks.append(section(text, block_id="results"))
    if view.waiting_drains:
        blocks.extend(_waiting_drain(view))
    return blocks


def _waiting_drain(view: TriageView) -> list[Block]:
    """The drain that waits for the next checkpoint: what it waits for, and two buttons: drain
    now (the approver policy is checked at the click) or cancel the wait (the drain never
    runs)."""
    text = "\n".join(f":hourglass_flowing_sand: {escape(line)}" for line in view.waiting_drains)
    hurry, cancel = _button_value(view, only="drain"), _button_value(view)
    risk = next((str(p.get("risk")) for p in view.proposals if p.get("action") == "drain"), "high")
    elements: list[Block] = [
        button(messages.DRAIN_NOW, ACTION_IDS["drain_now"], hurry, style="danger",
               confirm=_confirm(messages.DRAIN_NOW_CONFIRM, risk)),
        button(messages.CANCEL_WAIT, ACTION_IDS["drain_cancel"], cancel),
    ]  # fmt: skip
    return [
        section(text, block_id="drain-plan"),
        {"type": "actions", "block_id": f"drain-plan:{view.run_id}"[:255], "elements": elements},
    ]


def _by_action(
    proposals: tuple[Mapping[str, Any], ...],
) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """Proposals grouped by action name, in the order first proposed (`--only` names actions)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in proposals:
        groups.setdefault(str(p.get("action")), []).append(p)
    return list(groups.items())


def _proposal_line(view: TriageView, p: Mapping[str, Any]) -> str:
    reason = f" — {escape(str(p.get('reason')))}" if p.get("reason") else ""
    risk = str(p.get("risk"))
    two = messages.TWO_PERSON_MARK if risk in view.two_person_risks else ""
    return messages.PROPOSAL.format(
        description=escape(str(p.get("description"))).replace("`", "'"),
        risk=escape(risk),
        two_person=two,
        reason=reason,
    )


def _impact_lines(view: TriageView) -> list[str]:
    """Each node's impact once, whatever number of actions touch it; the recommendation only
    while a drain is still to decide (it weighs draining now against waiting)."""
    draining = any(
        str(p.get("action")) == "drain" and str(p.get("action")) not in view.decided_actions
        for p in view.proposals
    )
    lines: list[str] = []
    seen: set[str] = set()
    for p in view.proposals:
        impact = p.get("impact")
        if not impact or str(impact.get("node")) in seen:
            continue
        seen.add(str(impact.get("node")))
        for line in render_impact(impact):
            if draining or not line.startswith("Recommendation:"):
                lines.append(line)
    return lines


def _approve_one(view: TriageView, name: str, group: list[Mapping[str, Any]]) -> Block:
    value = _button_value(view, only=name)
    risk = str(group[0].get("risk"))
    todo = ", ".join(str(p.get("description")) for p in group)
    return button(
        messages.approve_only(name),
        f"{ACTION_IDS['approve_only']}:{name}"[:255],
        value,
        confirm=_confirm(todo, risk),
    )


def _button_value(view: TriageView, only: str | None = None) -> str:
    """The value of a run's button (bot.slack.approving.ButtonValue): the run, the incident,
    and for a per-action button the one action."""
    value: dict[str, str | None] = {"run": view.run_id, "incident": view.incident.ref}
    if only is not None:
        value["only"] = only
    return clip(json.dumps(value), MAX_BUTTON_VALUE)


def _confirm(todo: str, risk: str) -> Block:
    return {
        "title": {"type": "plain_text", "text": messages.CONFIRM_TITLE},
        "text": {"type": "mrkdwn", "text": clip(messages.confirm_text(escape(todo), risk), 300)},
        "confirm": {"type": "plain_text", "text": messages.APPROVE},
        "deny": {"type": "plain_text", "text": messages.CANCEL},
    }


def _buttons(view: TriageView) -> Block:
    value = _button_value(view)
    waiting = [p for p in view.proposals if str(p.get("action")) in view.pending_actions]
    todo = ", ".join(str(p.get("description")) for p in waiting)
    risky = sorted({str(p.get("risk")) for p in waiting}, key=_risk_order)
    label = messages.APPROVE_ALL if len(view.pending_actions) > 1 else messages.APPROVE
    elements: list[Block] = [
        button(
            label, ACTION_IDS["approve"], value, style="primary", confirm=_confirm(todo, risky[-1])
        ),
        button(messages.REJECT, ACTION_IDS["reject"], value, style="danger"),
    ]
    if any(p.get("action") in view.previewable for p in waiting):
        elements.append(button(messages.DRY_RUN, ACTION_IDS["dry_run"], value))
    return {"type": "actions", "block_id": f"approval:{view.run_id}", "elements": elements}


def _risk_order(risk: str) -> int:
    order = ["low", "medium", "high"]
    return order.index(risk) if risk in order else len(order)


def _who_may_approve(view: TriageView, approval: ApprovalState) -> str:
    text = messages.who_may_approve(approval.expires_at, view.approvers)
    waiting = {
        str(p.get("risk")) for p in view.proposals if p.get("action") in view.pending_actions
    }
    risks = sorted(waiting & set(view.two_person_risks), key=_risk_order)
    if risks:
        text += " · " + messages.TWO_PERSON.format(risks="/".join(risks))
    for override in view.policy_overrides:
        text += " · " + escape(override)
    return text


def _decision(approval: ApprovalState) -> str:
    return messages.decision(
        approval.state,
        actor=approval.actor,
        at=approval.decided_at,
        expires_at=approval.expires_at,
        reason=escape(approval.reason or ""),
    )


def _resolved(incident: IncidentView) -> str:
    try:
        mttr = format_duration(incident.figures().mttr)
    except TimestampOrderError:
        mttr = "n/a"
    return messages.RESOLVED.format(ref=incident.ref, mttr=mttr)


# -- building blocks and limits ------------------------------------------------------------------


def _percent(value: Any) -> str:
    return f"{float(value):.0%}" if isinstance(value, int | float) else "n/a"


def _reading(ev: Mapping[str, Any]) -> str:
    """An evidence value with its unit and, when peers were read, the peers' median."""
    value = ev.get("value")
    if isinstance(value, str) or value is None:
        return _value(value)
    return escape(
        format_reading(
            value,
            unit=str(ev.get("unit", "")),
            peer_median=ev.get("peer_median"),
            peers=int(ev.get("peers", 0)),
        )
    )


def _value(value: Any) -> str:
    """A number as the terminal shows it; a log line clipped, in code so Slack leaves it be."""
    if isinstance(value, str):
        return "`" + escape(clip(value.replace("`", "'"), MAX_EVIDENCE_CHARS)) + "`"
    return format_number(value)

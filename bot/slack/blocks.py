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
    divider,
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
ACTION_IDS = {"approve": "gpu_approve", "reject": "gpu_reject", "dry_run": "gpu_dry_run"}

_SEVERITY = {"critical": ":red_circle:", "warning": ":large_orange_circle:"}


@dataclass(frozen=True)
class ApprovalState:
    state: str  # pending | approved | rejected | expired
    expires_at: datetime
    actor: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None


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

    @property
    def pointer(self) -> str:
        text = messages.FULL_REPORT.format(ref=self.incident.ref)
        link = messages.incident_page_link(self.incident.ref, self.page_url)
        return f"{text} | {link}" if link else text


# -- the triage message ---------------------------------------------------------------------------


def triage_blocks(view: TriageView) -> list[Block]:
    """Header, progress, verdict with evidence, proposals with buttons or the decision."""
    blocks = [_header(view), context([_subtitle(view)])]
    if view.dry_run:
        blocks.append(section(messages.DRY_RUN_BANNER))
    blocks.append(section(_progress(view), block_id="progress"))
    if view.verdict:
        blocks += [divider(), *_verdict(view.verdict, view.pointer)]
    if view.verdict and view.run_status != "running":
        blocks += [divider(), *_proposals(view)]
    if view.incident.state == "resolved":
        blocks.append(section(_resolved(view.incident)))
    blocks.append(context([view.pointer]))
    return fit(blocks, pointer=view.pointer)


def triage_text(view: TriageView) -> str:
    """The notification/fallback text of a triage message."""
    inc = view.incident
    text = f"{inc.ref} {escape(inc.severity)}: {escape(inc.runbook)} on {escape(inc.target)}"
    if view.verdict:
        layer = escape(str(view.verdict.get("layer")))
        text += f": {layer} ({_percent(view.verdict.get('confidence'))})"
    return clip(text, MAX_FALLBACK_TEXT, pointer=view.pointer)


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
    started = messages.started_by(view.requester)
    text = (
        f"{escape(view.runbook_title)} · target `{escape(inc.target)}` · "
        f"state *{escape(inc.state)}* · "
        f"started by {started}"
    )
    if inc.acknowledged_by:
        text += f" · acknowledged by {mention(inc.acknowledged_by)}"
    return text


def _progress(view: TriageView) -> str:
    done = f"{view.steps_done}/{view.steps_total}" if view.steps_total else str(view.steps_done)
    if view.run_status == "failed":
        return messages.run_failed(done, view.pointer)
    if view.verdict:
        findings = sum(1 for line in view.progress if line.icon == "!")
        missing = sum(1 for line in view.progress if line.icon == "?")
        return messages.checked(done, findings=findings, unknown=missing)
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


def _verdict(verdict: Mapping[str, Any], pointer: str) -> list[Block]:
    layer = str(verdict.get("layer"))
    lines = [
        messages.VERDICT.format(layer=layer, confidence=_percent(verdict.get("confidence"))),
        messages.CULPRIT.format(culprit=escape(_culprits(verdict))),
        escape(clip(str(verdict.get("summary", "")), MAX_SUMMARY_CHARS)),
    ]
    blocks = [section("\n".join(lines), block_id="verdict")]
    findings = list(verdict.get("findings", []))
    for finding in findings[:MAX_FINDING_SECTIONS]:
        blocks.append(section(_finding(finding), block_id=None))
    if len(findings) > MAX_FINDING_SECTIONS:
        more = len(findings) - MAX_FINDING_SECTIONS
        blocks.append(context([messages.more_findings(more, pointer)]))
    ruled = ", ".join(f"`{layer}`" for layer in verdict.get("ruled_out", [])) or "none"
    missing = ", ".join(f"`{s}`" for s in verdict.get("missing_signals", [])) or "none"
    labels = [messages.RULED_OUT.format(layers=ruled), messages.MISSING.format(signals=missing)]
    unknown = ", ".join(f"`{layer}`" for layer in verdict.get("unknown_layers", []))
    if unknown:
        labels.insert(1, messages.UNKNOWN_LAYERS.format(layers=unknown))
    labels += [messages.DETECTOR.format(note=escape(n)) for n in verdict.get("detectors", [])[:3]]
    blocks.append(context(labels))
    return blocks


def _finding(finding: Mapping[str, Any]) -> str:
    tag = f"*[{finding.get('severity')} · {finding.get('layer')}]*"
    head = f"{tag} {escape(clip(str(finding.get('summary')), MAX_SUMMARY_CHARS))}"
    evidence = list(finding.get("evidence", []))
    lines = [head]
    for ev in evidence[:MAX_EVIDENCE_LINES]:
        labels = ", ".join(
            f"{k}={v}" for k, v in dict(ev.get("labels", {})).items() if k not in ("node",)
        )
        where = f" ({escape(labels)})" if labels else ""
        lines.append(f"    • `{ev.get('what')}` = {_reading(ev)}{where}")
    if len(evidence) > MAX_EVIDENCE_LINES:
        lines.append("    • " + messages.more_values(len(evidence) - MAX_EVIDENCE_LINES))
    return "\n".join(lines)


def _culprits(verdict: Mapping[str, Any]) -> str:
    details = verdict.get("culprit_details") or []
    if not details:
        return ", ".join(verdict.get("culprits", [])) or "none"
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
    return "; ".join(parts)


def _proposals(view: TriageView) -> list[Block]:
    if not view.proposals:
        return [section(messages.NO_ACTION)]
    lines = [messages.PROPOSED]
    for p in view.proposals:
        reason = f" — {escape(str(p.get('reason')))}" if p.get("reason") else ""
        lines.append(
            messages.PROPOSAL.format(
                description=p.get("description"), risk=p.get("risk"), reason=reason
            )
        )
        lines += [f"    {escape(line)}" for line in render_impact(p.get("impact"))]
    blocks = [section("\n".join(lines), block_id="proposals")]
    approval = view.approval
    if approval is None:
        return blocks
    if approval.state == "pending" and view.run_status == "awaiting_approval":
        blocks.append(_buttons(view))
        blocks.append(context([_who_may_approve(view, approval)]))
    else:
        blocks.append(context([_decision(approval)]))
        if view.results:
            text = "\n".join(render_line(line) for line in view.results)
            blocks.append(section(text, block_id="results"))
    return blocks


def _buttons(view: TriageView) -> Block:
    value = clip(json.dumps({"run": view.run_id, "incident": view.incident.ref}), MAX_BUTTON_VALUE)
    todo = ", ".join(str(p.get("description")) for p in view.proposals)
    risky = sorted(
        {str(p.get("risk")) for p in view.proposals}, key=["low", "medium", "high"].index
    )
    confirm = {
        "title": {"type": "plain_text", "text": messages.CONFIRM_TITLE},
        "text": {"type": "mrkdwn", "text": clip(messages.confirm_text(todo, risky[-1]), 300)},
        "confirm": {"type": "plain_text", "text": messages.APPROVE},
        "deny": {"type": "plain_text", "text": messages.CANCEL},
    }
    elements: list[Block] = [
        button(messages.APPROVE, ACTION_IDS["approve"], value, style="primary", confirm=confirm),
        button(messages.REJECT, ACTION_IDS["reject"], value, style="danger"),
    ]
    if any(p.get("action") in view.previewable for p in view.proposals):
        elements.append(button(messages.DRY_RUN, ACTION_IDS["dry_run"], value))
    return {"type": "actions", "block_id": f"approval:{view.run_id}", "elements": elements}


def _who_may_approve(view: TriageView, approval: ApprovalState) -> str:
    text = messages.who_may_approve(approval.expires_at, view.approvers)
    risks = sorted({str(p.get("risk")) for p in view.proposals} & set(view.two_person_risks))
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

"""Every sentence the bot says in Slack, in one place (bolt's `logger/messages.py`). Pure.

Each refusal says what happened and what to do next. Block layout lives in `blocks.py`; this
module only words things. Times are shown in UTC, as the rest of the bot keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from bot.errors import PolicyDenied
from bot.slack.kit import escape

HELP_TITLE = "*`/gpu` commands*"
HELP_FOOTER = (
    "Node names follow Kubernetes rules (lower-case letters, digits, `-`, `.`). "
    "Incident ids look like `INC-42`."
)
NO_INCIDENTS = "No open incidents. `/gpu incidents all` includes resolved ones."
NO_INCIDENTS_AT_ALL = "No incidents yet."
NO_RUNBOOKS = (
    "No runbooks are loaded; check GPU_ONCALL_RUNBOOK_DIRS and `gpu-oncall runbooks validate`."
)
NO_ACTION = "No action proposed."
FULL_REPORT = "full report: `/gpu incident {ref}` · `/gpu postmortem {ref}`"
DRY_RUN_BANNER = (
    ":test_tube: *Dry run* (GPU_ONCALL_POLICY__DRY_RUN): actions only say what they would do."
)
TWO_PERSON = "two-person rule: whoever asked cannot approve {risks}-risk actions"
STARTING = "Starting runbook `{runbook}` on `{target}`…"
RESOLVED = ":white_check_mark: {ref} resolved · MTTR {mttr}"


def user_error(exc: Exception) -> str:
    """A known error (bad input, policy refusal, missing thing): its own message is the fix."""
    if isinstance(exc, PolicyDenied):
        return f":no_entry: Not allowed: {exc.reason}"
    return f":warning: {exc}"


def unexpected_error(ref: str, *, on_timeline: bool) -> str:
    """Anything else: a reference id, never a traceback or a library's text."""
    where = "the incident timeline" if on_timeline else "the bot's log"
    return f"Unexpected error (ref {ref}); {where} has details"


def not_in_channel(channel: str) -> str:
    return (
        f"I can't post in <#{channel}>: invite me first (`/invite @gpu-oncall`), "
        "or run the command in a channel I'm in."
    )


def already_decided(*, state: str, actor: str | None, at: datetime | None) -> str:
    who = f" by {mention(actor)}" if actor else ""
    when = f" at {hhmm(at)} UTC" if at else ""
    return f"This approval was already {state}{who}{when}; nothing more to do."


def expired(*, ref: str, expires_at: datetime, retry: str) -> str:
    return (
        f"The approval for {ref} expired at {hhmm(expires_at)} UTC, so nothing was done. "
        f"If the fault persists, start a fresh run: `{retry}`"
    )


def acknowledged(ref: str) -> str:
    return f":eyes: {ref} acknowledged. Its triage message shows who acknowledged it."


def already_acknowledged(ref: str, actor: str | None, at: datetime | None) -> str:
    when = f" at {hhmm(at)} UTC" if at else ""
    return f"{ref} was already acknowledged by {mention(actor or 'someone')}{when}."


def cannot_ack_resolved(ref: str) -> str:
    return f"{ref} is already resolved; `/gpu postmortem {ref}` exports its timeline."


def postmortem_comment(ref: str, title: str, *, url: str | None = None, how: str = "") -> str:
    page = f" (live page: <{url}|{ref}>{how})" if url else ""
    return f":page_facing_up: Postmortem of {ref}: {title}{page}; open the HTML file in a browser"


def action_item_added(ref: str, owner: str, due: date | None) -> str:
    by = f", due {due.isoformat()}" if due else ""
    return (
        f"{ref}: action item for {mention(owner)}{by} recorded; it is in the postmortem "
        f"(`/gpu postmortem {ref}`)"
    )


def section_written(ref: str, section: str) -> str:
    name = section.replace("_", "-")
    return (
        f"{ref}: postmortem section *{name}* written in your words; the bot's draft no longer "
        "replaces it"
    )


PAGE_AUTH = {
    "none": "",
    "proxy": " (sign in through the team's single sign-on)",
    "token": (
        " (needs the pages' bearer token: `curl -H 'Authorization: Bearer $TOKEN'`; "
        "a browser gets 401 until GPU_ONCALL_PAGES__TOKEN or __AUTH=proxy is set)"
    ),
}
"""How the people in the channel open an incident page, by `pages.auth` (docs/slack.md §4)."""


def page_auth(auth: str, until: datetime | None) -> str:
    if auth == "signed" and until is not None:
        return f" (signed link, opens this page until {hhmm(until)} UTC; `/gpu incident` for more)"
    return PAGE_AUTH.get(auth, "")


def incident_page_link(
    ref: str, url: str | None, auth: str = "token", until: datetime | None = None
) -> str:
    """`<url|INC-7 page>` and how to open it, or empty when `pages.base_url` is unset."""
    return f"<{url}|{ref} page>{page_auth(auth, until)}" if url else ""


def where_details(
    url: str | None, auth: str, until: datetime | None = None, *, thread: bool
) -> str:
    """The triage message's last line: where the evidence and the full report are."""
    parts = [DETAILS_IN_THREAD] if thread else []
    if url:
        parts.append(f"<{url}|incident page>{page_auth(auth, until)}")
    return " · ".join(parts) or "`/gpu incident` has the full report"


def mttr_title(label: str, count: int) -> str:
    return f"*MTTR figures* for incidents resolved in the last {label} ({count} incidents, p50/p90)"


def mttr_empty(label: str) -> str:
    return (
        f"No incident was resolved in the last {label}; try a longer window, e.g. `/gpu mttr 30d`."
    )


def dry_run_title(ref: str) -> str:
    return f":test_tube: Dry run for {ref}: nothing was changed; the approval is still open."


def no_dry_run(action: str, description: str) -> str:
    return f"`{action}` has no dry run; approving would {description}."


def actions_title(decision: str, actor: str) -> str:
    return f"*Actions* ({decision} by {mention(actor)})"


def mention(actor: str) -> str:
    """Slack user ids as mentions, user groups as group mentions, anything else as is."""
    if actor[:1] in ("U", "W") and actor[1:].isalnum() and actor.isupper():
        return f"<@{actor}>"
    if actor[:1] == "S" and actor[1:].isalnum() and actor.isupper():
        return f"<!subteam^{actor}>"
    return actor


def mentions(actors: Sequence[str]) -> str:
    return ", ".join(mention(a) for a in actors) or "anyone in this workspace"


def hhmm(at: datetime) -> str:
    return at.strftime("%H:%M")


# -- the triage message (labels and sentences; layout is blocks.py) ------------------------------
VERDICT = "*Verdict:* `{layer}` (confidence {confidence})"
CULPRIT = "*Culprit:* {culprit}"
RULED_OUT = "*Ruled out:* {layers}"
MISSING = "*Missing signals:* {signals}"
UNKNOWN_LAYERS = "*Not checked (signals missing):* {layers}"
DETECTOR = ":warning: *Detector, not hardware:* {note}"
WITHHELD = "*Not proposed:* {action} {target} — {reason}"
PROPOSED = "*Proposed actions*"
PROPOSAL = "• `{description}` · risk *{risk}*{two_person}{reason}"
TWO_PERSON_MARK = " (two-person)"
DECISION = "*Decision:* {decision}"
NOT_ASKED = "carried out under the runbook's policy (no approval asked)"
DETAILS = "*Details*"
DETAILS_IN_THREAD = "findings, evidence and ruled-out layers: in the thread"
APPROVE_ALL = "Approve all"
VERIFICATION = "*Verification*"
NOTHING_DONE = "Nothing was carried out."
APPROVE, REJECT, DRY_RUN, CANCEL = "Approve", "Reject", "Dry run", "Cancel"
DRAIN_NOW, CANCEL_WAIT = "Drain now", "Cancel the drain"
DRAIN_NOW_CONFIRM = "Drain now, without waiting for the job's next checkpoint"
CONFIRM_TITLE = "Carry out these actions?"


def started_by(requester: str) -> str:
    return "Alertmanager" if requester == "alertmanager" else mention(requester)


def running(done: str) -> str:
    return f":hourglass_flowing_sand: *Running* {done} steps"


def checked(done: str, *, findings: int, unknown: int) -> str:
    return f":white_check_mark: *Checked* {done} steps: {findings} findings, {unknown} unknown"


def run_failed_short() -> str:
    return ":x: the run failed before it could propose anything"


def awaiting(actions: Sequence[str], expires_at: datetime) -> str:
    names = ", ".join(f"`{escape(a)}`" for a in actions)
    return f":raised_hand: {names} await approval (expires {hhmm(expires_at)} UTC)"


def approve_only(action: str) -> str:
    return f"Approve {action}"[:75]


def details_summary(ref: str, findings: int) -> str:
    return f"{ref}: {findings} findings, with their evidence"


def run_failed(done: str, pointer: str) -> str:
    return f":x: *Run failed* after {done} steps; {pointer}"


def earlier_steps(count: int) -> str:
    return f"… {count} earlier steps"


def more_findings(count: int, pointer: str) -> str:
    return f"+{count} more findings; {pointer}"


def more_values(count: int) -> str:
    return f"… {count} more values"


def confirm_text(todo: str, risk: str) -> str:
    return f"{todo} (risk: {risk})"


def who_may_approve(expires_at: datetime, approvers: Sequence[str]) -> str:
    return f"Expires {hhmm(expires_at)} UTC · approvers: {mentions(approvers)}"


def decision(
    state: str, *, actor: str | None, at: datetime | None, expires_at: datetime, reason: str
) -> str:
    """Who approved or rejected the actions and when (or that the approval expired)."""
    when = f" at {hhmm(at)} UTC" if at else ""
    if state == "approved":
        return f":white_check_mark: Approved by {mention(actor or '?')}{when}"
    if state == "expired":
        return f":hourglass: Expired at {hhmm(expires_at)} UTC: nothing was done"
    because = f": {reason}" if reason else ""
    return f":no_entry: Rejected by {mention(actor or '?')}{when}{because}"


def now_in_state(ref: str, state: str) -> str:
    return f"{ref} is now *{state}*."


def thread_summary(ref: str, *, done: int, total: int, state: str) -> str:
    if total == 0:
        return f"{ref}: nothing was carried out; now {state}"
    return f"{ref}: {done}/{total} actions done; now {state}"


def not_posted(channel: str, exc: Exception) -> str:
    """Timeline note when an alert's triage could not be posted to Slack."""
    return f"Triage not posted to Slack channel {channel}: {exc}"


# -- dry-run previews ------------------------------------------------------------------------------


def preview_gone(action: str, target: str) -> str:
    return f"{action} {target}: no such node any more"


def preview_unreadable(action: str, target: str, exc: Exception) -> str:
    return f"{action} {target}: cannot read the cluster ({exc})"


def preview_unchanged(action: str, target: str, state: str) -> str:
    return f"{action} {target}: already {state}, nothing would change"


def preview_cordon(target: str, pods: int, jobs: str) -> str:
    return f"cordon {target}: no new pods would land on it; its {pods} pods keep running{jobs}"


def preview_uncordon(target: str) -> str:
    return f"uncordon {target}: new pods could land on it again"


def preview_drain_empty(target: str) -> str:
    return f"drain {target}: no GPU workload to evict (DaemonSet pods stay)"


def preview_drain(target: str, *, pods: int, gpus: int, grace: object, jobs: str) -> str:
    return (
        f"drain {target}: would evict {pods} GPU pods holding {gpus} GPUs (DaemonSet pods stay; "
        f"grace {grace}s; PodDisruptionBudgets respected){jobs}"
    )


def jobs_list(listed: str, *, losing: bool) -> str:
    return f"; jobs losing ranks: {listed}" if losing else f" (GPU jobs: {listed})"


def dry_run_note(user: str, summary: str) -> str:
    """Timeline note of a Dry run click."""
    return f"Dry run requested by {user}: {summary}"


# -- payloads that are not ours --------------------------------------------------------------------
FOREIGN_BUTTON = (
    "this button does not belong to a gpu-oncall approval; use the buttons on a triage message, "
    "or `gpu-oncall approve INC-N`"
)


def unexpected_payload(kind: str, field: str = "") -> str:
    where = f" (field '{field}')" if field else ""
    return f"unexpected Slack {kind} payload{where}; is this request from Slack?"


def unknown_run(run_id: str) -> str:
    return f"unknown run '{run_id[:8]}': the message may come from another gpu-oncall install"


def no_approval(run_id: str) -> str:
    return f"run {run_id[:8]} has not asked for an approval"


# -- safety switches (bot/slack/safety.py) -------------------------------------------------------


def paused(actor: str, reason: str, noted: Sequence[str]) -> str:
    where = f" Noted on {', '.join(noted)}." if noted else ""
    return (
        f":octagonal_sign: Remediation paused by {mention(actor)}: {escape(reason)}. "
        f"No action that changes the cluster runs until an approver types `/gpu resume`.{where}"
    )


def resumed(actor: str, reasons: Sequence[str], noted: Sequence[str]) -> str:
    if not reasons:
        return "Not paused: nothing to resume."
    where = f" Noted on {', '.join(noted)}." if noted else ""
    return (
        f":arrow_forward: Remediation resumed by {mention(actor)} "
        f"(paused for: {escape('; '.join(reasons))}).{where}"
    )


def breaker_status(lines: Sequence[str]) -> str:
    return "*Circuit breaker*\n" + escape("\n".join(lines))


def breaker_reset(actor: str, reason: str, lines: Sequence[str]) -> str:
    why = f": {escape(reason)}" if reason else ""
    return f"Circuit breaker reset by {mention(actor)}{why}\n" + escape("\n".join(lines))

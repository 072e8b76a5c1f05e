"""Live triage messages: post one per run, edit it in place as steps complete, reply in its
thread with the verdict's evidence when the run first stops, then with action results and
verification.

Coordinates (channel, ts) are stored (`storage.messages`) and every update is rendered from the
database (`snapshots.py`), so after a restart the bot keeps editing the same message. Updates are
best effort: a failed `chat.update` is logged and retried at the next step, and never fails the
run it reports on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError

from bot.engine.running import RunOutcome
from bot.errors import UserInputError
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.slack import messages
from bot.slack.blocks import (
    TriageView,
    details_blocks,
    details_text,
    thread_blocks,
    triage_blocks,
    triage_text,
)
from bot.slack.deps import SlackDeps
from bot.slack.kit import Block, section
from bot.slack.page_link import page_link
from bot.slack.snapshots import read_triage
from storage import messages as message_store
from storage.db import session_scope

logger = logging.getLogger(__name__)

_NOT_MEMBER = {"not_in_channel", "channel_not_found", "is_archived"}


class TriageMessages:
    """Posts, finds and updates the triage messages of incidents."""

    def __init__(self, deps: SlackDeps) -> None:
        self.deps = deps

    def snapshot(self, incident_id: int, run_id: str | None) -> TriageView:
        deps = self.deps
        with session_scope(deps.db) as session:
            view = read_triage(
                session,
                incident_id=incident_id,
                run_id=run_id,
                catalog=deps.catalog,
                policy=deps.policy,
            )
        link = page_link(deps.config.pages, view.incident.ref, now=deps.clock.now())
        return replace(view, page_url=link.url, page_auth=link.auth, page_until=link.until)

    def placeholder(self, channel: str, text: str) -> tuple[str, str]:
        """Post a first line at once (the 'within a second' of DESIGN §1); (channel, ts)."""
        try:
            response = self.deps.client.chat_postMessage(
                channel=channel, text=text, blocks=[section(text)]
            )
        except SlackApiError as exc:
            if exc.response.get("error") in _NOT_MEMBER:
                raise UserInputError(messages.not_in_channel(channel)) from exc
            raise
        return str(response["channel"]), str(response["ts"])

    def adopt(
        self, *, incident_id: int, channel: str, ts: str, run_id: str | None = None
    ) -> LiveTriage:
        """Make (channel, ts) the live message of an incident (and run), stored for restarts."""
        with session_scope(self.deps.db) as session:
            message_store.save_message(
                session,
                incident_id=incident_id,
                channel=channel,
                ts=ts,
                run_id=run_id,
                at=self.deps.clock.now(),
            )
        live = LiveTriage(self, incident_id=incident_id, channel=channel, ts=ts, run_id=run_id)
        live.refresh()
        return live

    def post(self, *, incident_id: int, channel: str) -> LiveTriage:
        """Post an incident's triage message in `channel` and start tracking it."""
        view = self.snapshot(incident_id, None)
        channel, ts = self.placeholder(channel, triage_text(view))
        return self.adopt(incident_id=incident_id, channel=channel, ts=ts)

    def for_incident(self, incident_id: int) -> list[LiveTriage]:
        """The stored live messages of an incident (to refresh after an ack or a resolution)."""
        with session_scope(self.deps.db) as session:
            rows = message_store.messages_for_incident(session, incident_id)
        return [
            LiveTriage(self, incident_id=incident_id, channel=r.channel, ts=r.ts, run_id=r.run_id)
            for r in rows
        ]

    def refresh_incident(self, incident_id: int) -> None:
        """Re-render every live message of an incident, e.g. after its alert resolved."""
        for live in self.for_incident(incident_id):
            live.refresh()

    def channel_for(self, *, runbook: str, severity: str) -> str | None:
        """Where alert-triggered incidents go: per runbook, else per severity, else default."""
        s = self.deps.settings
        return (
            s.channels_by_runbook.get(runbook)
            or s.channels_by_severity.get(severity)
            or s.incident_channel
        )

    def notify_incident(self, incident_id: int) -> LiveTriage | None:
        """For alert intake: post a newly opened incident to its channel (None: no channel is
        configured for it). Pass `live.on_step` to `RunEngine.start`, then `live.finish(outcome)`.
        """
        view = self.snapshot(incident_id, None).incident
        channel = self.channel_for(runbook=view.runbook, severity=view.severity)
        if channel is None:
            logger.info("no Slack channel for %s; not posted", view.ref)
            return None
        try:
            return self.post(incident_id=incident_id, channel=channel)
        except (UserInputError, SlackClientError, OSError) as exc:
            # Triage must run whether or not Slack can be told: the timeline says why not.
            self._note(incident_id, messages.not_posted(channel, exc))
            logger.warning("%s not posted to %s: %s", view.ref, channel, _reason(exc))
            return None

    def _note(self, incident_id: int, text: str) -> None:
        deps = self.deps
        with session_scope(deps.db) as session:
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=EventKind.NOTE,
                at=deps.clock.now(),
                actor=BOT,
                summary=text,
            )

    # -- Web API calls, best effort ------------------------------------------------------------
    def update(self, live: LiveTriage) -> bool:
        view = self.snapshot(live.incident_id, live.run_id)
        client = self.deps.client
        return _best_effort(
            "chat.update",
            live,
            lambda: client.chat_update(
                channel=live.channel, ts=live.ts, text=triage_text(view), blocks=triage_blocks(view)
            ),
        )

    def reply(self, live: LiveTriage, *, text: str, blocks: list[Block]) -> bool:
        client = self.deps.client
        return _best_effort(
            "chat.postMessage",
            live,
            lambda: client.chat_postMessage(
                channel=live.channel, thread_ts=live.ts, text=text, blocks=blocks
            ),
        )


class LiveTriage:
    """One live triage message. `on_step` is a RunEngine step callback (throttled)."""

    def __init__(
        self,
        messages: TriageMessages,
        *,
        incident_id: int,
        channel: str,
        ts: str,
        run_id: str | None,
    ) -> None:
        self.messages, self.incident_id = messages, incident_id
        self.channel, self.ts, self.run_id = channel, ts, run_id
        self._lock = threading.Lock()
        self._last: float | None = None

    def on_step(self, step_id: str, output: Mapping[str, Any]) -> None:
        """A step completed: update the message unless the last update was too recent."""
        deps = self.messages.deps
        now = deps.monotonic()
        with self._lock:
            due = self._last is None or now - self._last >= deps.settings.update_interval_seconds
            if due:
                self._last = now
        if due:
            self.messages.update(self)

    def refresh(self) -> None:
        """Update the message now."""
        self.messages.update(self)

    def finish(self, outcome: RunOutcome, *, decided: bool = False) -> None:
        """The run stopped (ended or waits for approval): bind it, render the final state, and
        when actions were decided or carried out, report them in the thread."""
        self.run_id = outcome.run_id
        with session_scope(self.messages.deps.db) as session:
            message_store.bind_run(session, channel=self.channel, ts=self.ts, run_id=self.run_id)
        self.refresh()
        view = self.messages.snapshot(self.incident_id, self.run_id)
        undecided = all(a.state == "pending" for a in view.approvals)
        if view.verdict and not decided and undecided:  # the first stop: evidence in the thread
            self.messages.reply(self, text=details_text(view), blocks=details_blocks(view))
        if decided or view.results or view.verification:
            self.messages.reply(self, text=_thread_text(view), blocks=thread_blocks(view))


def _thread_text(view: TriageView) -> str:
    done = sum(1 for line in view.results if line.icon == "+")
    inc = view.incident
    return messages.thread_summary(inc.ref, done=done, total=len(view.results), state=inc.state)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error", "error"))
    return type(exc).__name__


def _best_effort(method: str, live: LiveTriage, call: Callable[[], object]) -> bool:
    try:
        call()
    except (SlackClientError, OSError) as exc:
        # Presentation only: the run goes on, and the next update renders everything again.
        logger.warning(
            "%s failed for %s/%s: %s",
            method,
            live.channel,
            live.ts,
            _reason(exc),
            extra={"incident_id": live.incident_id},
        )
        return False
    return True

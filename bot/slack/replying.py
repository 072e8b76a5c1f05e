"""Answers to `/gpu` commands, after the listener has acknowledged them.

`diagnose` and `run` validate the inputs, post the triage message, open (or attach to) the
incident and hand the run to the run pool; the rest read the database and answer ephemerally,
except `postmortem`, which uploads the HTML postmortem to the channel for everyone.
"""

from __future__ import annotations

from collections.abc import Mapping

from slack_sdk.errors import SlackApiError

from bot.engine.catalog import RunbookCatalog
from bot.engine.inputs import resolve_inputs
from bot.engine.loading import LoadedRunbook
from bot.engine.targets import check_node_exists
from bot.errors import UserInputError
from bot.incidents import lifecycle
from bot.incidents.reporting import read_incident, read_postmortem, read_views
from bot.incidents.states import IncidentState
from bot.incidents.views import incident_view
from bot.intake import commands as grammar
from bot.slack import answers, classify, humans, messages, safety
from bot.slack.deps import Reply, SlackDeps
from bot.slack.failures import guarded
from bot.slack.kit import Block, escape
from bot.slack.page_link import page_link
from bot.slack.triaging import TriageMessages
from storage import incidents as incident_store
from storage.db import session_scope

_NOT_MEMBER = {"not_in_channel", "channel_not_found", "is_archived"}


def command_syntax(catalog: RunbookCatalog) -> list[grammar.RunbookSyntax]:
    """What the `/gpu` grammar needs of the loaded runbooks."""
    return [
        grammar.RunbookSyntax(
            name=loaded.name,
            target_input=loaded.runbook.target_input,
            node_inputs=frozenset(n for n, s in loaded.runbook.inputs.items() if s.type == "node"),
            verbs=tuple(v for v in loaded.runbook.triggers.commands if v not in grammar.VERBS),
        )
        for loaded in catalog.runbooks.values()
    ]


class Replies:
    """Carries out one parsed `/gpu` command for the person who typed it."""

    def __init__(self, deps: SlackDeps, messages: TriageMessages) -> None:
        self.deps, self.messages = deps, messages
        self.syntax = command_syntax(deps.catalog)

    def handle(self, text: str, *, user: str, channel: str, reply: Reply) -> None:
        command = grammar.parse_command(text, runbooks=self.syntax)
        catalog = self.deps.catalog
        match command:
            case grammar.Diagnose(node=node):
                loaded = catalog.for_command("diagnose") or catalog.get("node-diagnose")
                target = loaded.runbook.target_input or "node"
                self.start(loaded, {target: node}, user=user, channel=channel, reply=reply)
            case grammar.RunRunbook(runbook=name, inputs=inputs):
                self.start(catalog.get(name), inputs, user=user, channel=channel, reply=reply)
            case grammar.ListIncidents(include_resolved=everything):
                self._incidents(everything, reply)
            case grammar.ShowIncident(incident_id=incident_id):
                with session_scope(self.deps.db) as session:
                    view, events = read_views(session, incident_id)
                pages, now = self.deps.config.pages, self.deps.clock.now()
                link = page_link(pages, view.ref, now=now)  # fresh: the posted one may expire
                _say(reply, view.ref, answers.incident_blocks(view, events, link))
            case grammar.Ack(incident_id=incident_id):
                self._ack(incident_id, user=user, reply=reply)
            case grammar.Postmortem(incident_id=incident_id):
                self._postmortem(incident_id, channel=channel)
            case grammar.Mttr():
                humans.mttr(command, deps=self.deps, reply=reply)
            case grammar.FiredAt() | grammar.Note() | grammar.Pin() | grammar.Resolve():
                humans.record(
                    command,
                    deps=self.deps,
                    user=user,
                    reply=reply,
                    refresh=self.messages.refresh_incident,
                )
            case grammar.ActionItem() | grammar.Section():
                humans.postmortem_text(command, deps=self.deps, user=user, reply=reply)
            case grammar.ListRunbooks():
                _say(reply, "Runbooks", answers.runbooks_blocks(self._runbooks()))
            case grammar.Classify():
                classify.answer_command(self.deps, command, user=user, reply=reply)
            case grammar.Help():
                verbs = {v: s.name for s in self.syntax for v in s.verbs}
                _say(reply, "/gpu help", answers.help_blocks(grammar.USAGE, verbs))
            case grammar.Breaker() | grammar.PauseActions() | grammar.ResumeActions():
                safety.handle(command, deps=self.deps, user=user, reply=reply)

    # -- runs ------------------------------------------------------------------------------------
    def start(
        self,
        loaded: LoadedRunbook,
        inputs: Mapping[str, str],
        *,
        user: str,
        channel: str,
        reply: Reply,
    ) -> None:
        """Validate, post the message, open the incident, and run on the run pool."""
        deps = self.deps
        resolved = resolve_inputs(loaded, inputs)
        name = loaded.runbook.target_input
        target = str(resolved[name]) if name else loaded.name
        kind = loaded.runbook.inputs[name].type if name else "runbook"
        if kind == "node":  # before the placeholder: a typo gets one line, no message
            check_node_exists(deps.cluster, target)
        starting = messages.STARTING.format(runbook=escape(loaded.name), target=escape(target))
        channel, ts = self.messages.placeholder(channel, starting)
        incident_id, _ = deps.engine.open_incident(loaded, resolved, actor=user)
        live = self.messages.adopt(incident_id=incident_id, channel=channel, ts=ts)

        def run() -> None:
            outcome = deps.engine.start(
                loaded,
                inputs=resolved,
                incident_id=incident_id,
                requester=user,
                on_step=live.on_step,
            )
            live.finish(outcome)

        self.deps.runs.submit(guarded(run, reply=reply, deps=deps, incident_id=incident_id))

    # -- reads -----------------------------------------------------------------------------------
    def _incidents(self, everything: bool, reply: Reply) -> None:
        with session_scope(self.deps.db) as session:
            rows = incident_store.list_incidents(session, open_only=not everything)
            views = [incident_view(row) for row in rows]
        blocks = answers.incidents_blocks(views, include_resolved=everything)
        _say(reply, f"{len(views)} incidents", blocks)

    def _ack(self, incident_id: int, *, user: str, reply: Reply) -> None:
        clock = self.deps.clock
        with session_scope(self.deps.db) as session:
            incident = read_incident(session, incident_id)
            if incident.state == IncidentState.RESOLVED:
                raise UserInputError(messages.cannot_ack_resolved(incident.ref))
            stamped = lifecycle.mark_acknowledged(session, incident, at=clock.now(), actor=user)
            ref, by, at = incident.ref, incident.acknowledged_by, incident.acknowledged_at
        if not stamped:
            reply(text=messages.already_acknowledged(ref, by, at), response_type="ephemeral")
            return
        reply(text=messages.acknowledged(ref), response_type="ephemeral")
        self.messages.refresh_incident(incident_id)

    def _postmortem(self, incident_id: int, *, channel: str) -> None:
        with session_scope(self.deps.db) as session:
            incident = read_incident(session, incident_id)
            ref, title = incident.ref, incident.title
            url = self.deps.config.pages.incident_url(ref)
            link = page_link(self.deps.config.pages, ref, now=self.deps.clock.now())
            document = read_postmortem(
                session, incident_id, fmt="html", page_url=url, now=self.deps.clock.now()
            )
        try:
            self.deps.client.files_upload_v2(
                channel=channel,
                content=document,
                filename=f"{ref}-postmortem.html",
                title=f"{ref} postmortem",
                initial_comment=messages.postmortem_comment(
                    ref, title, url=link.url, how=messages.page_auth(link.auth, link.until)
                ),
            )
        except SlackApiError as exc:
            if exc.response.get("error") in _NOT_MEMBER:
                raise UserInputError(messages.not_in_channel(channel)) from exc
            raise

    def _runbooks(self) -> list[answers.RunbookRow]:
        catalog = self.deps.catalog
        return [
            answers.RunbookRow(
                name=name,
                title=catalog.get(name).runbook.metadata.title,
                alerts=tuple(a.alertname for a in catalog.get(name).runbook.triggers.alerts),
                verbs=tuple(catalog.get(name).runbook.triggers.commands),
                storms=tuple(catalog.get(name).runbook.triggers.storms),
            )
            for name in catalog.names()
        ]


def _say(reply: Reply, text: str, blocks: list[Block]) -> None:
    reply(text=text, blocks=blocks, response_type="ephemeral")

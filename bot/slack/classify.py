"""Evidence from Slack: `/gpu classify [INC-N] <pasted text>`, and files shared in an incident's
thread, judged the way `gpu-oncall triage-bundle` judges them (bot.diagnosis.evidence) and put
on the incident's timeline.

A file is downloaded from its `url_private` with the bot token, only from Slack's own hosts (the
configured API host, `*.slack.com`, `*.slack-edge.com`), at most `evidence.max_file_bytes` each
and `evidence.max_files` per message; tarballs and `.gz` files are read by bot.intake.bundles within
its limits, never extracted to disk outside a private temporary directory. A file in a thread
whose parent is not an incident's message is ignored: the bot does not read every upload.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError
from slack_bolt import App

from bot.diagnosis.evidence import EvidenceReport, recognize
from bot.errors import UserInputError
from bot.incidents import lifecycle
from bot.incidents.reporting import read_incident
from bot.incidents.timeline import EventKind
from bot.intake import commands as grammar
from bot.intake.bundles import read_bundle
from bot.limits import SLACK_DOWNLOAD_SECONDS
from bot.slack.deps import Reply, SlackDeps
from bot.slack.failures import guarded
from bot.slack.kit import Block, context, escape, fit, section
from storage import incidents as incident_store
from storage import messages as message_store
from storage.db import session_scope

logger = logging.getLogger(__name__)

MAX_LISTED_FINDINGS = 6
_SLACK_HOSTS = (".slack.com", ".slack-edge.com")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class SharedFile(BaseModel):
    """The fields of a Slack file object the bot reads."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    name: str = "file"
    size: int = 0
    url_private: str = ""
    url_private_download: str = ""


class FileMessage(BaseModel):
    """A `message` event carrying files, as the Events API delivers it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    channel: str
    user: str = ""
    ts: str
    thread_ts: str | None = None
    files: list[SharedFile] = []


@dataclass(frozen=True)
class Judged:
    """The report over some texts, with what was read and what was skipped."""

    report: EvidenceReport
    sources: tuple[str, ...]
    notes: tuple[str, ...] = ()


# -- presentation (pure) ------------------------------------------------------------------------
def evidence_blocks(judged: Judged, *, recorded: str | None) -> list[Block]:
    """The same verdict `triage-bundle` prints: layer, confidence, culprits, summary, the
    deciding findings with their cited lines, what was read; and where it was recorded."""
    report = judged.report
    culprits = ", ".join(report.culprits) or "none"
    head = (
        f"*Evidence verdict:* `{report.layer.value}` (confidence {report.confidence:.0%})\n"
        f"*Culprit:* {escape(culprits)}\n{escape(report.summary)}"
    )
    lines = []
    for finding in (report.deciding or report.findings)[:MAX_LISTED_FINDINGS]:
        cited = ", ".join(line.cite() for line in finding.lines[:3])
        where = f" ({escape(cited)})" if cited else ""
        lines.append(
            f"• *[{finding.severity.value} · {finding.layer.value}]* "
            f"{escape(finding.summary)}{where}"
        )
    formats = ", ".join(sorted({f for _, f in report.formats})) or "none recognised"
    read = f"Read: {escape(', '.join(judged.sources))} · formats: {escape(formats)}"
    notes = [escape(n) for n in judged.notes[:3]]
    footer = [read, *notes] + ([f"Recorded on {recorded}'s timeline"] if recorded else [])
    blocks = [section(head)] + ([section("\n".join(lines))] if lines else [])
    return fit([*blocks, context(footer[:10])], pointer="")


# -- judging -----------------------------------------------------------------------------------
def judge_texts(
    deps: SlackDeps, texts: Sequence[tuple[str, str]], notes: Sequence[str] = ()
) -> Judged:
    """One verdict over every text (bot.diagnosis.evidence.recognize, the CLI's judge)."""
    report = recognize(texts, catalog=deps.log_catalog)
    return Judged(report, tuple(name for name, _ in texts), tuple(notes))


def record_evidence(
    deps: SlackDeps, incident_id: int, judged: Judged, *, actor: str, files: Sequence[str] = ()
) -> str:
    """Put the verdict on the incident's timeline (a note by the person who brought it)."""
    with session_scope(deps.db) as session:
        incident = read_incident(session, incident_id)
        lifecycle.record(
            session,
            incident_id=incident_id,
            kind=EventKind.NOTE,
            at=deps.clock.now(),
            actor=actor,
            summary=f"Evidence from {', '.join(judged.sources)}: {judged.report.summary}"[:500],
            payload={
                "evidence": judged.report.to_dict(),
                "sources": list(judged.sources),
                "files": list(files),
            },
        )
        return incident.ref


# -- /gpu classify -----------------------------------------------------------------------------
def answer_command(deps: SlackDeps, command: grammar.Classify, *, user: str, reply: Reply) -> None:
    """`/gpu classify [INC-N] <text>`: the verdict, ephemerally; recorded when INC-N is given."""
    judged = judge_texts(deps, [("pasted text", command.text)])
    recorded = None
    if command.incident_id is not None:
        recorded = record_evidence(deps, command.incident_id, judged, actor=user)
    blocks = evidence_blocks(judged, recorded=recorded)
    text = f"Evidence verdict: {judged.report.layer.value}"
    reply(text=text, blocks=blocks, response_type="ephemeral")


# -- files shared in an incident's thread ----------------------------------------------------------
def register(app: App, *, deps: SlackDeps) -> None:
    """Listen for messages with files (and `file_shared`) in incidents' threads."""

    @app.event("message")
    def on_message(event: dict[str, Any]) -> None:
        if not event.get("files") or not event.get("thread_ts") or event.get("bot_id"):
            return  # only people's files in threads (never the bot's own uploads)
        try:
            message = FileMessage.model_validate(event)
        except ValidationError:
            logger.info("ignored a file message with an unexpected shape")
            return
        _submit(deps, message)

    @app.event("file_shared")
    def on_file_shared(event: dict[str, Any]) -> None:
        # Acknowledged and left alone: the `message` event of the same upload carries the
        # thread and the file object, so reading both would judge every file twice.
        return


def _submit(deps: SlackDeps, message: FileMessage) -> None:
    incident_id = incident_of_thread(deps, channel=message.channel, thread_ts=message.thread_ts)
    if incident_id is None:
        return
    reply = ThreadReply(deps, channel=message.channel, thread_ts=str(message.thread_ts))
    job = guarded(
        lambda: classify_files(deps, message, incident_id=incident_id, reply=reply),
        reply=reply,
        deps=deps,
        incident_id=incident_id,
    )
    deps.runs.submit(job)


def incident_of_thread(deps: SlackDeps, *, channel: str, thread_ts: str | None) -> int | None:
    """The incident whose message starts the thread, else None."""
    if not thread_ts:
        return None
    with session_scope(deps.db) as session:
        found = message_store.find_message(session, channel=channel, ts=thread_ts)
        if found is None or incident_store.get_incident(session, found.incident_id) is None:
            return None
        return found.incident_id


def classify_files(
    deps: SlackDeps, message: FileMessage, *, incident_id: int, reply: Reply
) -> None:
    """Download the message's files, judge them together, answer in the thread, record it."""
    limits = deps.config.evidence
    files = message.files[: limits.max_files]
    notes = [f"{len(message.files) - len(files)} more file(s) not read (evidence.max_files)"]
    notes = notes if len(message.files) > len(files) else []
    with tempfile.TemporaryDirectory(prefix="gpu-oncall-evidence-") as tmp:
        for index, shared in enumerate(files):
            path = Path(tmp) / safe_name(shared.name)
            if path.exists():  # two files of one name: keep both
                path = path.with_name(f"{index}-{path.name}")
            note = download(deps, shared, into=path)
            if note:
                notes.append(note)
        bundle = read_bundle(Path(tmp), max_member_bytes=limits.max_file_bytes)
    if not bundle.texts:
        reasons = "; ".join([*notes, *bundle.notes]) or "every file was empty"
        raise UserInputError(f"no readable text in the shared file(s): {reasons}")
    judged = judge_texts(deps, bundle.texts, [*notes, *bundle.notes])
    ref = record_evidence(
        deps, incident_id, judged, actor=message.user or "slack", files=[f.id for f in files]
    )
    blocks = evidence_blocks(judged, recorded=ref)
    reply(text=f"Evidence verdict: {judged.report.layer.value}", blocks=blocks)


def safe_name(name: str) -> str:
    """A file name that cannot leave the temporary directory."""
    cleaned = _SAFE_NAME.sub("_", Path(name).name).lstrip(".")
    return cleaned[:100] or "file"


def download(deps: SlackDeps, shared: SharedFile, *, into: Path) -> str | None:
    """Fetch one file with the bot token; a note (not an error) when it is refused or too big."""
    limit = deps.config.evidence.max_file_bytes
    url = shared.url_private_download or shared.url_private
    if shared.size > limit:
        return f"{shared.name}: {shared.size} bytes, over evidence.max_file_bytes ({limit})"
    if not url or not _from_slack(url, api_url=deps.settings.api_url):
        return f"{shared.name}: not downloaded (its URL is not a Slack file URL)"
    token = deps.client.token or ""
    timeout = deps.config.timeouts.http_seconds
    deadline = monotonic() + SLACK_DOWNLOAD_SECONDS
    try:
        with httpx.stream(
            "GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        ) as response:
            if response.status_code != 200:
                return f"{shared.name}: Slack answered HTTP {response.status_code}"
            return _save(response, into, name=shared.name, limit=limit, deadline=deadline)
    except httpx.HTTPError as exc:
        return f"{shared.name}: download failed ({type(exc).__name__})"


def _save(
    response: httpx.Response,
    into: Path,
    *,
    name: str,
    limit: int,
    deadline: float,
    clock: Callable[[], float] = monotonic,
) -> str | None:
    """Write the body to `into` within the size limit and the overall deadline (a per-read
    timeout alone lets a slow drip hold the worker for ever); a note when either is passed."""
    size = 0
    with into.open("wb") as out:
        for chunk in response.iter_bytes():
            size += len(chunk)
            problem = None
            if size > limit:
                problem = f"{name}: over evidence.max_file_bytes ({limit})"
            elif clock() > deadline:
                problem = f"{name}: not downloaded within {SLACK_DOWNLOAD_SECONDS:g} s"
            if problem:
                out.close()
                into.unlink()
                return problem
            out.write(chunk)
    return None


def _from_slack(url: str, *, api_url: str) -> bool:
    """Whether `url` is on Slack's file hosts (or the configured API's own host)."""
    parts, api = urlsplit(url), urlsplit(api_url)
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http") or not host:
        return False
    if host == api.hostname and parts.port == api.port:
        return parts.scheme == api.scheme
    return parts.scheme == "https" and host.endswith(_SLACK_HOSTS)


class ThreadReply:
    """A Reply that answers in the incident's thread (events have no response_url)."""

    def __init__(self, deps: SlackDeps, *, channel: str, thread_ts: str) -> None:
        self.deps, self.channel, self.thread_ts = deps, channel, thread_ts

    def __call__(
        self,
        *,
        text: str = "",
        blocks: Sequence[dict[str, Any]] | None = None,
        response_type: str | None = None,
        replace_original: bool | None = None,
    ) -> Any:
        return self.deps.client.chat_postMessage(
            channel=self.channel,
            thread_ts=self.thread_ts,
            text=text,
            blocks=list(blocks) if blocks else None,
        )

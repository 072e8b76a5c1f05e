"""The one Slack error handler (dispatch's `app_error_handler`): a known error becomes its own
ephemeral message; anything else becomes "Unexpected error (ref abc123)", a logged traceback
and, when an incident is involved, a timeline note carrying the same ref.

Bolt's `@app.error` and the run pool's job wrapper both end here, so a failure reads the same
whether it happened while acknowledging a click or half-way through a run. Replies go only to
requests that passed verification (`trusted_reply`): an unverified request's `response_url` is
whatever its sender wrote, and the bot must not post to it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from bot.errors import OncallError
from bot.incidents import lifecycle
from bot.incidents.timeline import BOT, EventKind
from bot.slack import messages
from bot.slack.deps import Reply, SlackDeps
from bot.slack.verifying import TRUSTED
from integrations.errors import IntegrationError
from storage.db import session_scope
from storage.errors import StorageError

logger = logging.getLogger(__name__)


def report_failure(
    error: BaseException, *, reply: Reply | None, deps: SlackDeps, incident_id: int | None
) -> None:
    """Tell the person who asked what went wrong, and keep the details where on-call looks."""
    if isinstance(error, OncallError | IntegrationError):
        logger.info("request refused: %s", type(error).__name__, extra={"incident_id": incident_id})
        text = messages.user_error(error)
    else:
        ref = uuid.uuid4().hex[:6]
        logger.error(
            "unexpected error in a Slack request (ref %s)",
            ref,
            exc_info=error,
            extra={"incident_id": incident_id, "ref": ref},
        )
        noted = incident_id is not None and _note(deps, incident_id, ref, error)
        text = messages.unexpected_error(ref, on_timeline=noted)
    if reply is not None:
        reply(text=text, response_type="ephemeral", replace_original=False)


def trusted_reply(respond: Any, context: Any) -> Reply | None:
    """Bolt's `respond` for this request, or None unless the request passed verification
    (`TRUSTED` in its context) and carries a response_url."""
    if context is None or context.get(TRUSTED) is not True:
        return None
    if respond is None or not getattr(respond, "response_url", None):
        return None
    reply: Reply = respond
    return reply


def guarded(
    job: Callable[[], None], *, reply: Reply | None, deps: SlackDeps, incident_id: int | None
) -> Callable[[], None]:
    """`job` wrapped for the run pool: whatever escapes it is reported, never lost."""

    def run() -> None:
        try:
            job()
        except Exception as exc:  # noqa: BLE001  (boundary: reported like bolt's @app.error)
            report_failure(exc, reply=reply, deps=deps, incident_id=incident_id)

    return run


def _note(deps: SlackDeps, incident_id: int, ref: str, error: BaseException) -> bool:
    try:
        with session_scope(deps.db) as session:
            lifecycle.record(
                session,
                incident_id=incident_id,
                kind=EventKind.NOTE,
                at=deps.clock.now(),
                actor=BOT,
                summary=f"Slack request failed unexpectedly (ref {ref}): {type(error).__name__}",
                payload={"ref": ref, "error": type(error).__name__},
            )
    except StorageError:
        logger.warning("could not note ref %s on INC-%s", ref, incident_id)
        return False
    return True

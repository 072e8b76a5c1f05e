"""The bot's error tree. Every error carries text fit for a human on call.

`UserInputError` means the person (or file) asking was wrong: CLI exit 2, ephemeral Slack reply.
`NotFound` is a UserInputError about a missing thing. `RunbookError` names file, step and field.
Only boundaries (cli.main, the HTTP routes, engine.running) catch broadly.
"""

from __future__ import annotations


class OncallError(Exception):
    """Root of every error the bot raises on purpose."""

    retryable = False


class UserInputError(OncallError):
    """Bad input from a person or a file: say what was wrong, where, and what is valid."""


class NotFound(UserInputError):
    """A named thing (incident, run, runbook, node) does not exist."""


class RunbookError(UserInputError):
    """A runbook file is invalid. The message names the file, the step and the field."""

    def __init__(
        self, message: str, *, file: str = "", step: str | None = None, field: str | None = None
    ) -> None:
        parts = [file] if file else []
        if step:
            parts.append(f"step '{step}'")
        if field:
            parts.append(f"field '{field}'")
        parts.append(message)
        super().__init__(": ".join(parts))
        self.file, self.step, self.field, self.detail = file, step, field, message


class PolicyDenied(OncallError):
    """An approval or action was refused by policy (who, expiry, blast radius)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RunStateError(UserInputError):
    """A run is not in a state that allows the request (e.g. approving a finished run)."""


class StepError(RunbookError):
    """A runbook step's expression or template failed while the run evaluated it (a typo, a
    field the data lacks): the step fails loudly, naming file, step and field, instead of
    dropping a proposal, passing raw template text on, or reading as "verification failed"."""

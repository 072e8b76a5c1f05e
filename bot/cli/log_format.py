"""How the command line logs: the level and format from `Settings.log` (text, or one JSON object
per line for a log shipper), and the effective settings `serve` logs at start with every secret
masked (SecretStr values, tokens, passwords in URLs, header maps).

Presentation only: the modules that log (lifecycle, engine, actions) pass their context in
`extra={"incident_id", "run_id", "step", "action"}` and never choose a format.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, SecretStr

from bot.config import Settings

CONTEXT = ("incident_id", "run_id", "step", "action", "target")
"""`extra` keys copied into a JSON log line when a record carries them."""
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"
MASK = "(set, hidden)"
_SECRET_NAMES = ("token", "secret", "password", "headers", "webhook_url")
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]+(?P<at>@)")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC ISO 8601), level, logger, message, context."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in CONTEXT:
            value = record.__dict__.get(key)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(settings: Settings, *, command: str | None) -> None:
    """Set the root logger's level and format for `command` (replacing earlier handlers)."""
    default = "INFO" if command == "serve" else "WARNING"
    handler = logging.StreamHandler()
    if settings.log.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=settings.log.level or default, handlers=[handler], force=True)


def effective_settings(settings: Settings) -> dict[str, Any]:
    """Every setting as it is in force, secrets masked: what `serve` logs at start."""
    return {name: _masked(name, getattr(settings, name)) for name in type(settings).model_fields}


def _masked(name: str, value: Any) -> Any:
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, BaseModel):
        return {sub: _masked(sub, getattr(value, sub)) for sub in type(value).model_fields}
    if value is not None and any(word in name.lower() for word in _SECRET_NAMES):
        return MASK if value else value
    if isinstance(value, str):
        return _URL_PASSWORD.sub(r"\g<head>***\g<at>", value)
    if isinstance(value, Mapping):
        return {str(k): _masked(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_masked(name, v) for v in value]
    return value if isinstance(value, int | float | bool) or value is None else str(value)

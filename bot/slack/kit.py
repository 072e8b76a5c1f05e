"""Block Kit primitives and limits for every Slack renderer. Pure.

Slack refuses oversized messages, so renderers build with these helpers and finish with `fit`:
at most 50 blocks, section text 3,000 characters, header 150, button value 2,000. Long content
is cut with a pointer to the full report, and the approval buttons are never the part cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Block = dict[str, Any]

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_BUTTON_VALUE = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_FALLBACK_TEXT = 3000

ICONS = {
    "+": ":white_check_mark:",
    "!": ":warning:",
    "?": ":grey_question:",
    "x": ":x:",
    ".": ":small_blue_diamond:",
}
OUTCOMES = {
    "changed": "+",
    "already_done": "+",
    "dry_run": ".",
    "skipped": "?",
    "failed": "x",
    "blocked": "!",
}


@dataclass(frozen=True)
class Line:
    """One line of progress, an action result or a verification: an icon key and its text."""

    icon: str
    text: str


def section(text: str, *, block_id: str | None = None) -> Block:
    block: Block = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
    if block_id:
        block["block_id"] = block_id
    return block


def context(texts: Sequence[str]) -> Block:
    elements = [{"type": "mrkdwn", "text": t} for t in texts[:MAX_CONTEXT_ELEMENTS]]
    return {"type": "context", "elements": elements}


def divider() -> Block:
    return {"type": "divider"}


def render_line(line: Line) -> str:
    return f"{ICONS.get(line.icon, ICONS['.'])} {escape(line.text)}"


def outcome_icon(outcome: str) -> str:
    """The icon key of an action outcome (changed, already_done, dry_run, skipped, failed)."""
    return OUTCOMES.get(outcome, ".")


def escape(text: str) -> str:
    """Slack mrkdwn control characters in data (summaries, details) shown literally."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int, *, pointer: str = "") -> str:
    """`text` cut to `limit` characters, ending with an ellipsis and the pointer if cut."""
    if len(text) <= limit:
        return text
    tail = f"… (truncated; {pointer})" if pointer else "…"
    return text[: max(0, limit - len(tail))] + tail


def fit(blocks: list[Block], *, pointer: str) -> list[Block]:
    """Enforce Block Kit limits: clip texts, and past 50 blocks drop middle blocks (never the
    buttons or the last block), saying how many were dropped and where the full report is."""
    for block in blocks:
        _clip_block(block, pointer)
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    keep_tail = [b for b in blocks[:-1] if b["type"] == "actions"] + [blocks[-1]]
    room = MAX_BLOCKS - len(keep_tail) - 1
    head = [b for b in blocks[:-1] if b["type"] != "actions"][:room]
    dropped = len(blocks) - len(head) - len(keep_tail)
    return [*head, context([f"{dropped} more blocks omitted; {pointer}"]), *keep_tail]


def _clip_block(block: Block, pointer: str) -> None:
    text = block.get("text")
    if isinstance(text, dict):
        limit = MAX_HEADER_TEXT if block["type"] == "header" else MAX_SECTION_TEXT
        text["text"] = clip(str(text["text"]), limit, pointer=pointer if limit > 200 else "")
    for element in block.get("elements", []):
        if element.get("type") == "mrkdwn":
            element["text"] = clip(str(element["text"]), MAX_SECTION_TEXT, pointer=pointer)
        if element.get("type") == "button":
            element["value"] = clip(str(element["value"]), MAX_BUTTON_VALUE)


def button(
    text: str, action_id: str, value: str, *, style: str | None = None, confirm: Block | None = None
) -> Block:
    button: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }
    if style:
        button["style"] = style
    if confirm:
        button["confirm"] = confirm
    return button

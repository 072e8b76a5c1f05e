"""Untrusted text in the bot's own triage message is escaped for mrkdwn (issue 20).

Covers: a `job`/`service` label value such as `<!channel> <https://evil.example/approve|Approve
INC>` that becomes the incident's target, severity or runbook shows literally (`&lt;!channel&gt;`)
in the fallback text, every mrkdwn section and context, and the placeholder posted first;
generated text in any of those fields never reaches a mrkdwn field unescaped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_blocks_rendering import VERDICT, incident

from bot.slack.blocks import TriageView, triage_blocks, triage_text

HOSTILE = "<!channel> <https://evil.example/approve|Approve INC>"


def view(**changes: Any) -> TriageView:
    return TriageView(
        incident=incident(**changes),
        runbook_title="ECC storm",
        requester="alertmanager",
        verdict=VERDICT,
    )


def mrkdwn_texts(value: Any) -> Iterator[str]:
    """Every text Slack parses as mrkdwn in some blocks (plain_text is shown literally)."""
    if isinstance(value, dict):
        if value.get("type") == "plain_text":
            return
        for key, inner in value.items():
            if key == "text" and isinstance(inner, str):
                yield inner
            else:
                yield from mrkdwn_texts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from mrkdwn_texts(inner)


def test_a_hostile_target_is_shown_literally_in_text_and_blocks() -> None:
    triage = view(target=HOSTILE, severity=HOSTILE, runbook=HOSTILE)
    texts = [triage_text(triage), *mrkdwn_texts(triage_blocks(triage))]
    assert any("&lt;!channel&gt;" in text for text in texts)
    for text in texts:
        assert "<!channel>" not in text
        assert "<https://evil.example" not in text


def test_the_running_placeholder_escapes_the_target() -> None:
    running = TriageView(
        incident=incident(target=HOSTILE, state="running"),
        runbook_title="ECC storm",
        requester="alertmanager",
        run_status="running",
    )
    for text in mrkdwn_texts(triage_blocks(running)):
        assert "<!channel>" not in text


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["target", "severity", "runbook", "state", "title"]),
    tail=st.text(max_size=40),
)
def test_generated_untrusted_text_never_reaches_mrkdwn_unescaped(field: str, tail: str) -> None:
    marker = "<zz" + tail + ">"
    triage = view(**{field: marker})
    for text in [triage_text(triage), *mrkdwn_texts(triage_blocks(triage))]:
        assert "<zz" not in text

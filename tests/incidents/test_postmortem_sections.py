"""The publishable sections of a postmortem (bot/incidents/drafting.py) and their rendering.

Covers: Markdown, HTML and JSON carry the same sections (summary, impact, root cause and
contributing factors, what went well / badly, action items) with the same text; the impact
names the job and ranks the approval showed; what went well or badly compares each figure with
its target; follow-ups become unassigned draft action items; every Markdown cell is
HTML-escaped, so a `<script>` in a note or a title stays text (issue 20).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from html.parser import HTMLParser

from bot.incidents.drafting import TARGETS, draft_sections
from bot.incidents.mttr import DEFINITIONS
from bot.incidents.postmortem import render_postmortem
from bot.incidents.views import EventView
from tests.incidents import fixed_postmortem as fixed

SCRIPT = "<script>alert(1)</script>"


def job_impact_event() -> EventView:
    job = {"job": "llm-pretrain", "ranks_lost": 1, "ranks_total": 8}
    job |= {"gpus_lost": 8, "gpus_total": 64}
    return EventView(
        at=fixed.events()[0].at + timedelta(minutes=4),
        kind="approval_requested",
        actor="bot",
        summary="Approval requested: cordon gpu-node-03",
        payload={"proposals": [{"action": "cordon", "impact": {"jobs": [job]}}]},
    )


def rendered(fmt: str, events: list[EventView] | None = None) -> str:
    return render_postmortem(
        fixed.incident(), events or [*fixed.events(), job_impact_event()], fmt, story=fixed.story()
    )


class SectionIds(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs).get("id")
        if tag == "section" and found:
            self.ids.append(found)


def test_markdown_html_and_json_carry_the_same_sections() -> None:
    document = json.loads(rendered("json"))["sections"]
    markdown, page = rendered("md"), rendered("html")
    ids = SectionIds()
    ids.feed(page)
    for heading, section_id in [
        ("## Summary", "summary"),
        ("## Impact", "impact"),
        ("## Root cause and contributing factors", "root-cause"),
        ("## What went well", "went-well"),
        ("## What went badly", "went-badly"),
        ("## Action items", "action-items"),
    ]:
        assert heading in markdown.splitlines()
        assert section_id in ids.ids
    for text in [document["summary"], document["root_cause"], *document["impact"]]:
        assert text in markdown and text in page
    for item in document["action_items"]:
        assert item["text"] in page and item["owner"] is None and item["draft"]


def test_impact_names_the_jobs_and_ranks_and_the_figures_meet_targets() -> None:
    sections = draft_sections(
        fixed.incident(), fixed.story(), [*fixed.events(), job_impact_event()]
    )
    assert "Job llm-pretrain: 1 of 8 ranks, 8 of 64 GPUs on the culprit node" in sections.impact
    assert "GPU-hours lost: 1.9" in sections.impact
    figures = fixed.incident().figures()
    for definition in DEFINITIONS:
        value = getattr(figures, definition.name)
        if value is None:
            continue
        over = value > TARGETS[definition.name]
        where = sections.went_badly if over else sections.went_well
        said = f"{'over' if over else 'within'} the"
        assert any(line.startswith(f"{definition.label} ") and said in line for line in where)


def test_a_script_in_a_note_or_title_stays_text_in_the_markdown() -> None:
    note = dataclasses.replace(fixed.events()[-1], kind="note", summary=f"see {SCRIPT}")
    incident = dataclasses.replace(fixed.incident(), title=f"storm {SCRIPT}")
    markdown = render_postmortem(incident, [*fixed.events(), note], "md", story=fixed.story())
    assert "<script>" not in markdown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown

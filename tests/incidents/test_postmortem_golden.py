"""Golden structure of the postmortem on a fixed incident (tests/incidents/fixed_postmortem.py),
in all three formats.

Covers: Markdown has the evidence, actions, verification and follow-ups sections with the fixed
values; JSON carries the figures in seconds, the story (verdict, approvals, actions, snapshot)
and the follow-ups, and round-trips; HTML shows the header, the MTTx table with each formula's
start and end timestamps, the timeline chart (four lanes, one marker per known timestamp, one
dot per event, pinned dots marked), the metric chart (culprit and peer series, onset marker) on
the same time axis, accessible text alternatives, dark-mode and print styles, escapes event
text, references no external URL and has no script; `pinned_only` keeps exactly the pinned
events; the live page has a meta refresh and the export does not.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from bot.incidents.postmortem import parse_postmortem_json, render_postmortem
from tests.incidents import fixed_postmortem as fixed


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of the whole page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [
            a
            for t, a in self.tags
            if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


def parse(page: str) -> Elements:
    elements = Elements()
    elements.feed(page)
    return elements


def html(*, pinned_only: bool = False, refresh: int | None = None) -> str:
    return render_postmortem(
        fixed.incident(),
        fixed.events(),
        "html",
        story=fixed.story(),
        pinned_only=pinned_only,
        refresh_seconds=refresh,
    )


def test_markdown_has_the_evidence_actions_verification_and_follow_up_sections() -> None:
    text = render_postmortem(fixed.incident(), fixed.events(), "md", story=fixed.story())
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Summary",
        "## Impact",
        "## Root cause and contributing factors",
        "## What went well",
        "## What went badly",
        "## Action items",
        "## Timestamps (UTC)",
        "## Figures",
        "## Evidence",
        "## Actions",
        "## Verification",
        "## Follow-ups",
        "## Timeline",
    ]
    assert "| MTTR | 14m | resolved_at - fired_at |" in text
    assert "| GPU-hours lost | 1.9 | 8 GPUs x 14m |" in text
    assert "| critical/gpu_hardware | GPU 5 on gpu-node-03: 4 double-bit ECC errors/min | " \
        "gpu.ecc.dbe_rate[gpu=5] = 4.0 |" in text
    assert "- Ruled out: network, kubernetes" in text
    assert "- Missing signals: gpu.ecc.sbe_rate" in text
    assert "- Approval (approve): approved by U042 at 2026-03-01 12:05:00" in text
    row = "| cordon | gpu-node-03 | succeeded | gpu-node-03 cordoned | 2026-03-01 12:09:00 |"
    assert row in text
    assert "- 2026-03-01 12:09:00: Verification passed: dbe = 0" in text
    assert "- Return gpu-node-03 to service (uncordon) once it is repaired." in text
    assert "fault onset 2026-03-01 11:59:00" in text


def test_json_has_figures_story_and_follow_ups_and_round_trips() -> None:
    text = render_postmortem(fixed.incident(), fixed.events(), "json", story=fixed.story())
    data = json.loads(text)
    assert data["figures"] == {
        "mttd": 120.0,
        "mtta": 300.0,
        "time_to_diagnosis": 30.0,
        "mttm": 540.0,
        "mttr": 840.0,
    }
    story = data["story"]
    assert story["approvals"][0]["actor"] == "U042"
    assert story["approvals"][0]["decided_at"] == "2026-03-01T12:05:00+00:00"
    assert [a["action"] for a in story["actions"]] == ["cordon"]
    assert story["snapshot"]["onset_at"] == "2026-03-01T11:59:00+00:00"
    assert [s["role"] for s in story["snapshot"]["series"]] == ["culprit", "peer"]
    assert len(data["follow_ups"]) == 2
    incident, events = parse_postmortem_json(text)
    assert incident == fixed.incident()
    assert [e.kind for e in events] == [e.kind for e in fixed.events()]


def test_html_header_and_figure_table_show_each_formulas_start_and_end() -> None:
    page = parse(html())
    text = " ".join(" ".join(page.text).split())
    for label, value in [("Runbook", "ecc-storm"), ("Layer", "gpu_hardware (confidence 97%)"),
                         ("Culprit", "gpu-node-03"), ("Severity", "critical"),
                         ("State", "resolved")]:  # fmt: skip
        assert f"{label} {value}" in text
    rows = [a["data-figure"] for a in page.find("tr") if "data-figure" in a]
    assert rows == ["MTTD", "MTTA", "Time to diagnosis", "MTTM", "MTTR", "GPU-hours lost"]
    assert "MTTR 14m resolved_at - fired_at fired_at 2026-03-01 12:00:00 " \
        "resolved_at 2026-03-01 12:14:00" in text
    assert "Time to diagnosis 30s diagnosed_at - detected_at detected_at 2026-03-01 12:02:00 " \
        "diagnosed_at 2026-03-01 12:02:30" in text


def test_html_timeline_chart_has_lanes_markers_and_one_dot_per_event() -> None:
    page = parse(html())
    (svg,) = page.find("svg", id="timeline-chart")
    assert svg["role"] == "img" and svg["aria-labelledby"]
    lanes = [a["data-lane"] for a in page.find("g", **{"class": "lane"})]
    assert lanes == ["alert", "bot", "humans", "actions"]
    markers = [a["data-marker"] for a in page.find("g", **{"class": "marker"})]
    timeline_markers = markers[:6]
    assert timeline_markers == [
        "fired", "detected", "diagnosed", "acknowledged", "mitigated", "resolved"
    ]
    dots = [a for t, a in page.tags if t == "circle"]
    assert len(dots) == len(fixed.events())
    assert sum("pinned" in a["class"] for a in dots) == sum(e.pinned for e in fixed.events())
    assert {a["data-lane"] for a in dots if a["data-kind"] == "approval_granted"} == {"humans"}
    assert {a["data-lane"] for a in dots if a["data-kind"] == "action_succeeded"} == {"actions"}


def test_html_metric_chart_has_the_culprit_peers_and_onset_on_the_same_axis() -> None:
    page = parse(html())
    (svg,) = page.find("svg", id="metric-chart")
    assert svg["role"] == "img"
    series = [(a["data-series"], a["data-role"]) for t, a in page.tags if t == "polyline"]
    assert sorted(series) == [("gpu-node-03 GPU 5", "culprit"), ("gpu-node-04 GPU 0", "peer")]
    onset = page.find("g", **{"class": "marker onset"})
    assert [a["data-marker"] for a in onset] == ["onset"]
    lines = [a for t, a in page.tags if t == "line"]
    fired_x = {a["x1"] for a in lines if a.get("x1") == a.get("x2")}
    # the fired marker of both charts sits at one x: the shared time axis
    marker_xs = re.findall(r'data-marker="fired"><line x1="([\d.]+)"', html())
    assert len(marker_xs) == 2 and marker_xs[0] == marker_xs[1] and marker_xs[0] in fired_x
    rows = page.find("table", id="metric-data")
    assert rows, "the metric chart has a data table alternative"


def test_html_is_self_contained_accessible_and_escapes_event_text() -> None:
    page = html()
    assert "<script" not in page.replace("&lt;script", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    urls = set(re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # an XML namespace, never fetched
    assert not re.search(r"""\b(?:src|href)\s*=\s*["'](?!#)""", page)
    assert "@media (prefers-color-scheme: dark)" in page and "@media print" in page
    assert "default-src 'none'" in page
    assert '<title id="timeline-chart-title">' in page
    assert '<desc id="metric-chart-desc">' in page


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
def test_pinned_only_keeps_exactly_the_pinned_events(fmt: str) -> None:
    text = render_postmortem(
        fixed.incident(), fixed.events(), fmt, story=fixed.story(), pinned_only=True
    )
    pinned = [e for e in fixed.events() if e.pinned]
    if fmt == "json":
        assert [e["summary"] for e in json.loads(text)["timeline"]] == [e.summary for e in pinned]
    elif fmt == "md":
        rows = [line for line in text.splitlines() if line.startswith("| 2026-")]
        assert len(rows) == len(pinned) and all("(pinned)" in r for r in rows)
    else:
        page = parse(text)
        assert len(page.find("tr", data_pinned="true")) == len(pinned)
        assert len([a for t, a in page.tags if t == "circle"]) == len(pinned)


def test_only_the_live_page_refreshes_itself() -> None:
    assert 'http-equiv="refresh"' not in html()
    assert '<meta http-equiv="refresh" content="30">' in html(refresh=30)

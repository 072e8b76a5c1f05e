"""Marker labels of the postmortem's charts never overlap (bot/incidents/charts.py).

Covers: over generated incidents (the lifecycle timestamps seconds or hours apart, often equal,
with or without a fault onset), the HTML postmortem rendered in Debian's headless chromium has no
two marker-label boxes (getBoundingClientRect, measured by a script added to the page, read back
from the dumped DOM) that intersect, in the timeline or in the metric chart, and every label stays
inside its chart; the pure placement keeps its estimated boxes apart and inside the chart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from incidents.fixed_postmortem import FIRED, events, incident, story
from servers.chromium import Chromium, headless_chromium

from bot.incidents.charts import LEFT, RIGHT, WIDTH, Marker, label_width, place_labels
from bot.incidents.html_page import render_html_page
from bot.incidents.views import IncidentView

MEASURE = """
<script>
const out = {};
for (const svg of document.querySelectorAll("svg[id]")) {
  const frame = svg.getBoundingClientRect();
  out[svg.id] = {frame: [frame.left, frame.top, frame.right, frame.bottom], labels: []};
  for (const t of svg.querySelectorAll(".marker text")) {
    const b = t.getBoundingClientRect();
    out[svg.id].labels.push([t.textContent, b.left, b.top, b.right, b.bottom]);
  }
}
const pre = document.createElement("pre");
pre.id = "label-boxes";
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>
"""

gaps = st.integers(min_value=0, max_value=4 * 3600).map(lambda s: timedelta(seconds=s))
small_gaps = st.integers(min_value=0, max_value=20).map(lambda s: timedelta(seconds=s))


@st.composite
def incidents(draw: st.DrawFn) -> tuple[IncidentView, timedelta | None]:
    """Lifecycle timestamps in order: mostly seconds apart (the labels crowd), sometimes hours."""
    steps = [draw(st.one_of(small_gaps, gaps)) for _ in range(5)]
    at = [FIRED]
    for step in steps:
        at.append(at[-1] + step)
    onset = draw(st.one_of(st.none(), st.integers(-600, 600).map(lambda s: timedelta(seconds=s))))
    view = replace(
        incident(),
        fired_at=at[0],
        detected_at=at[1],
        created_at=at[1],
        diagnosed_at=at[2],
        acknowledged_at=at[3],
        mitigated_at=at[4],
        resolved_at=at[5],
    )
    return view, onset


def intersect(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    with headless_chromium(tmp_path_factory.mktemp("chromium")) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pages")


@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example is a browser run
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=incidents())
def test_no_two_marker_labels_intersect_in_chromium(
    browser: Chromium, pages: Path, case: tuple[IncidentView, timedelta | None]
) -> None:
    view, onset = case
    told = story()
    assert told.snapshot is not None
    snapshot = replace(told.snapshot, onset_at=None if onset is None else FIRED + onset)
    html = render_html_page(view, events(), story=replace(told, snapshot=snapshot))
    page = pages / "postmortem.html"
    # the page allows no script (its CSP); this copy lets the measuring one run
    measured = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    page.write_text(measured.replace("</body>", MEASURE + "</body>"))
    dom = browser.dump_dom(page.as_uri())
    found = re.search(r'<pre id="label-boxes">(.*?)</pre>', dom, re.S)
    assert found, "the measuring script did not run"
    charts = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert set(charts) >= {"timeline-chart", "metric-chart"}
    for name, chart in charts.items():
        labels = chart["labels"]
        expected = 6 if name == "timeline-chart" else 6 + (onset is not None)
        assert len(labels) == expected, (name, labels)
        left, top, right, bottom = chart["frame"]
        for text, *box in labels:
            assert left <= box[0] and box[2] <= right and top <= box[1] and box[3] <= bottom, (
                name, text, box, chart["frame"])  # fmt: skip
        for i, (a_text, *a) in enumerate(labels):
            for b_text, *b in labels[i + 1 :]:
                assert not intersect(a, b), (name, a_text, a, b_text, b)


@given(st.lists(st.tuples(st.floats(0, WIDTH), st.sampled_from(
    ["fired", "detected", "diagnosed", "acknowledged", "mitigated", "resolved", "fault onset"]
)), max_size=8))  # fmt: skip
def test_placed_labels_keep_apart_and_inside_the_chart(points: list[tuple[float, str]]) -> None:
    markers = [Marker(text, FIRED, x, text) for x, text in points]
    placed, rows = place_labels(markers)
    assert rows <= max(len(markers), 0)
    boxes = [
        (m.text_x - label_width(m.text) / 2, m.text_y, m.text_x + label_width(m.text) / 2)
        for m in placed
    ]
    for left, _, right in boxes:
        assert left >= LEFT - 1e-6 and right <= WIDTH - RIGHT + 1e-6
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[1] != b[1] or a[2] <= b[0] or b[2] <= a[0]

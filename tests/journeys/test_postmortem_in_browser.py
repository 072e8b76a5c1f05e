"""The HTML postmortem in a real browser: Debian's headless chromium loads the live incident page
from `serve` (uvicorn on 127.0.0.1) and the file `gpu-oncall postmortem --format html -o`
exported, behind a recording proxy.

Covers: the ECC alert's triage stores an evidence snapshot (sim telemetry's `read_range`) and the
page draws it: both charts are in the browser's DOM with the timeline markers (fired, detected,
diagnosed), the culprit's GPU series and its peers, and the fault onset; the live page refreshes
itself (the incident awaits approval) and the export does not; no request leaves the page (the
proxy sees none from it, while a control page with one external image is caught); a PNG
screenshot of each is saved under tmp_path for review (not committed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import SecretStr
from servers.chromium import Chromium, headless_chromium
from servers.oncall import TOKEN, Bot, alert, running_bot, webhook

from bot.config import PagesSettings, ServerSettings, Settings, StorageSettings

pytestmark = pytest.mark.browser


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def inside(self, svg_id: str) -> list[tuple[str, dict[str, str]]]:
        """Tags from the svg with `svg_id` up to the next svg."""
        found = (i for i, (t, a) in enumerate(self.tags) if t == "svg" and a.get("id") == svg_id)
        start = next(found)
        rest = self.tags[start + 1 :]
        end = next((i for i, (t, _) in enumerate(rest) if t == "svg"), len(rest))
        return rest[:end]


def parse(dom: str) -> Dom:
    parsed = Dom()
    parsed.feed(dom)
    return parsed


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=2),
        pages=PagesSettings(auth="none", refresh_seconds=30),  # chromium sends no credentials
    )


@pytest.fixture
def triaged(settings: Settings, scenario_dir: Path) -> Iterator[Bot]:
    """The ECC storm alert triaged by the running bot, stopped at its approval."""
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot:
        assert bot.rt.fleet is not None
        starts = bot.rt.fleet.t0 - timedelta(minutes=10)
        firing = alert("GPUEccStorm", {"Hostname": "gpu-node-03", "gpu": "5"}, starts_at=starts)
        assert bot.post_alerts(webhook([firing])).status_code == 200
        bot.settle()
        yield bot


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    with headless_chromium(tmp_path) as chromium:
        yield chromium


def assert_charts(dom: Dom) -> None:
    timeline = dom.inside("timeline-chart")
    markers = [a["data-marker"] for t, a in timeline if t == "g" and "data-marker" in a]
    assert markers[:3] == ["fired", "detected", "diagnosed"]
    assert any(t == "circle" and a["data-kind"] == "verdict" for t, a in timeline)
    metric = dom.inside("metric-chart")
    series = {(a["data-series"], a["data-role"]) for t, a in metric if t == "polyline"}
    assert ("gpu-node-03 GPU 5", "culprit") in series
    assert {role for _, role in series} == {"culprit", "peer"} and len(series) >= 3
    assert "onset" in [a["data-marker"] for t, a in metric if t == "g" and "data-marker" in a]


def test_the_live_page_from_serve_renders_both_charts_and_fetches_nothing(
    triaged: Bot, browser: Chromium, tmp_path: Path
) -> None:
    url = f"{triaged.url}/incidents/INC-1"
    dom = browser.dump_dom(url)
    parsed = parse(dom)
    assert_charts(parsed)
    assert any(t == "meta" and a.get("http-equiv") == "refresh" for t, a in parsed.tags)
    listing = parse(browser.dump_dom(f"{triaged.url}/incidents?state=open"))
    assert ("a", {"href": "/incidents/INC-1"}) in listing.tags
    browser.screenshot(url, tmp_path / "INC-1-live.png")
    assert browser.recorder.from_pages() == []


def test_the_exported_file_renders_offline_and_fetches_nothing(
    triaged: Bot, settings: Settings, browser: Chromium, tmp_path: Path
) -> None:
    exported = tmp_path / "INC-1-postmortem.html"
    env = {**os.environ, "GPU_ONCALL_STORAGE__URL": settings.storage.url}
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "postmortem", "INC-1", "--format", "html", "-o",
         str(exported)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert str(exported) in done.stdout
    parsed = parse(browser.dump_dom(exported.as_uri()))
    assert_charts(parsed)
    assert not any(t == "meta" and a.get("http-equiv") == "refresh" for t, a in parsed.tags)
    browser.screenshot(exported.as_uri(), tmp_path / "INC-1-export.png")
    assert browser.recorder.from_pages() == []


def test_the_recorder_catches_a_page_that_fetches_from_outside(
    browser: Chromium, tmp_path: Path
) -> None:
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://cdn.example.invalid/x.png"></body></html>')
    browser.dump_dom(control.as_uri())
    assert ("GET", "cdn.example.invalid", "http://cdn.example.invalid/x.png") in (
        browser.recorder.from_pages()
    )

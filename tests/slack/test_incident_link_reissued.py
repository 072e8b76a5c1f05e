"""`/gpu incident INC-N` re-issues the incident-page link: the triage message's signed link
expires after `pages.link_minutes`; the incident answer carries one signed at the time it is
asked, which opens the page over real HTTP while the old one is refused (the bot's clock moved
on, no wall time).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr
from servers.slack_harness import SlackHarness

from bot.config import PagesSettings

KEY = "pages-secret"
BASE = "https://oncall.example.com"
Start = Callable[..., SlackHarness]
LINK = re.compile(r"<(https://oncall\.example\.com/incidents/INC-1\?[^|>]+)\|")


def _links(text: str) -> list[str]:
    return LINK.findall(text)


def _path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_an_expired_page_link_is_reissued_by_gpu_incident(start_bot: Start) -> None:
    pages = PagesSettings(auth="token", token=SecretStr(KEY), base_url=BASE, link_minutes=60)
    harness = start_bot(pages=pages)
    ts = harness.triage_alert()
    (posted,) = _links(harness.message(ts).text)
    http = httpx.Client(base_url=harness.server.url, timeout=30.0)
    assert http.get(_path(posted)).status_code == 200

    harness.rt.clock.advance(timedelta(minutes=61))  # type: ignore[attr-defined]
    assert http.get(_path(posted)).status_code == 401  # the posted link expired

    name = harness.command("incident INC-1")
    harness.settle()
    (reply,) = harness.replies(name)
    (fresh,) = _links(reply.text)
    assert fresh != posted
    assert "signed link, opens this page until" in reply.text
    assert http.get(_path(fresh)).status_code == 200
    http.close()

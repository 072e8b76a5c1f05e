"""The incident-page link Slack posts opens the page for the people in the channel, over real
HTTP to `serve`, without weakening the pages' auth.

Covers: under `pages.auth: token` the posted link is signed for one incident and says until when
it opens; that link answers 200 with no bearer token; a changed signature, the same signature on
another incident or on the list, a link past its expiry (the bot's clock moved on) and a link
signed with another key are 401; under `proxy` and `none` the link is plain and says how to open
it; no `base_url`, no link.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, Bot, alert, running_bot, webhook

from bot.config import PagesSettings, ServerSettings, Settings, StorageSettings
from bot.slack import messages
from bot.slack.page_link import page_link

KEY = "pages-secret"
BASE = "https://oncall.example.com"


@pytest.fixture
def bot(tmp_path: Path, scenario_dir: Path) -> Iterator[Bot]:
    settings = Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=2),
        pages=PagesSettings(auth="token", token=SecretStr(KEY), base_url=BASE, link_minutes=60),
    )
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        assert running.rt.fleet is not None
        starts = running.rt.fleet.t0 - timedelta(minutes=10)
        firing = alert("GPUEccStorm", {"Hostname": "gpu-node-03", "gpu": "5"}, starts_at=starts)
        assert running.post_alerts(webhook([firing])).status_code == 200
        running.settle()
        yield running


def _path(url: str | None) -> str:
    assert url is not None
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def test_the_signed_link_opens_one_page_until_it_expires(bot: Bot) -> None:
    pages = bot.rt.settings.pages
    link = page_link(pages, "INC-1", now=bot.rt.clock.now())
    assert link.auth == "signed" and link.until is not None
    said = messages.where_details(link.url, link.auth, link.until, thread=True)
    assert f"opens this page until {link.until:%H:%M} UTC" in said
    path = _path(link.url)
    assert path.startswith("/incidents/INC-1?exp=")

    opened = bot.http.get(path)
    assert opened.status_code == 200 and "INC-1" in opened.text
    query = path.split("?", 1)[1]
    tampered = query[:-1] + ("0" if query[-1] != "0" else "1")
    assert bot.http.get(f"/incidents/INC-1?{tampered}").status_code == 401
    assert bot.http.get(f"/incidents/INC-2?{query}").status_code == 401
    assert bot.http.get(f"/incidents?{query}").status_code == 401
    other = PagesSettings(auth="token", token=SecretStr("other"), base_url=BASE)
    forged = _path(page_link(other, "INC-1", now=bot.rt.clock.now()).url)
    assert bot.http.get(forged).status_code == 401
    assert bot.http.get("/incidents/INC-1").status_code == 401  # no link, no token: as before

    bot.rt.clock.advance(timedelta(minutes=61))  # type: ignore[attr-defined]
    assert bot.http.get(path).status_code == 401


def test_proxy_none_and_no_base_url() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    proxy = page_link(PagesSettings(auth="proxy", base_url=BASE), "INC-1", now=now)
    assert proxy.url == f"{BASE}/incidents/INC-1" and proxy.auth == "proxy"
    assert "single sign-on" in messages.where_details(proxy.url, proxy.auth, thread=False)
    bare = page_link(PagesSettings(auth="none", base_url=BASE), "INC-1", now=now)
    assert messages.where_details(bare.url, bare.auth, thread=False) == (
        f"<{BASE}/incidents/INC-1|incident page>"
    )
    unset = page_link(PagesSettings(auth="token", base_url=BASE), "INC-1", now=now)
    assert unset.auth == "token" and "401" in messages.where_details(
        unset.url, unset.auth, thread=False
    )
    assert page_link(PagesSettings(), "INC-1", now=now).url is None

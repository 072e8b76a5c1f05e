"""The incident pages served by `serve`, over real HTTP: auth and the list's filters.

Covers: with `pages.auth: token`, no token or a wrong one is a 401 with a Bearer challenge, the
right token is a 200, and an auth-proxy header is not honoured; an unset token refuses every
request; with `pages.auth: proxy` the configured header (non-empty) is a 200 and its absence a
401; `/incidents` lists the triaged incident, filters by state/runbook/layer and answers an
unknown value with a 400 naming the valid ones; an unknown or malformed incident is a 404;
the page of an open incident refreshes itself and carries no-store / nosniff headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from servers.oncall import TOKEN, Bot, alert, running_bot, webhook

from bot.config import PagesSettings, ServerSettings, Settings, StorageSettings

PAGES_TOKEN = "pages-secret"


def settings_for(tmp_path: Path, pages: PagesSettings) -> Settings:
    return Settings(
        storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
        server=ServerSettings(token=SecretStr(TOKEN), workers=2),
        pages=pages,
    )


def triage(bot: Bot) -> None:
    assert bot.rt.fleet is not None
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    firing = alert("GPUEccStorm", {"Hostname": "gpu-node-03", "gpu": "5"}, starts_at=starts)
    assert bot.post_alerts(webhook([firing])).status_code == 200
    bot.settle()


@pytest.fixture
def token_bot(tmp_path: Path, scenario_dir: Path) -> Iterator[Bot]:
    pages = PagesSettings(auth="token", token=SecretStr(PAGES_TOKEN))
    settings = settings_for(tmp_path, pages)
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot:
        triage(bot)
        yield bot


def get(bot: Bot, path: str, **headers: str) -> httpx.Response:
    return bot.http.get(path, headers=headers)


def bearer(token: str = PAGES_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_no_token_or_a_wrong_one_is_401_and_the_proxy_header_is_ignored(token_bot: Bot) -> None:
    for path in ("/incidents", "/incidents/INC-1"):
        refused = get(token_bot, path)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert get(token_bot, path, **bearer("wrong")).status_code == 401
        assert get(token_bot, path, **{"X-Forwarded-User": "alice"}).status_code == 401
        assert get(token_bot, path, **bearer()).status_code == 200
    assert get(token_bot, "/incidents", Authorization=f"Basic {PAGES_TOKEN}").status_code \
        == 401


def test_the_list_filters_and_refuses_unknown_values(token_bot: Bot) -> None:
    listed = get(token_bot, "/incidents", **bearer())
    assert listed.headers["content-type"].startswith("text/html")
    assert 'href="/incidents/INC-1"' in listed.text
    for query, present in [
        ("state=open", True),
        ("state=awaiting_approval&runbook=ecc-storm&layer=gpu_hardware", True),
        ("state=resolved", False),
        ("layer=fabric", False),
        ("runbook=", True),
    ]:
        page = get(token_bot, f"/incidents?{query}", **bearer())
        assert page.status_code == 200, query
        assert ('href="/incidents/INC-1"' in page.text) is present, query
    bad = get(token_bot, "/incidents?state=sleeping", **bearer())
    assert bad.status_code == 400
    assert bad.text.strip() == (
        "unknown state 'sleeping' (valid: open (any but resolved/failed), triaging, "
        "awaiting_approval, mitigating, monitoring, resolved, failed)"
    )
    assert get(token_bot, "/incidents?layer=gpu", **bearer()).status_code == 400
    assert get(token_bot, "/incidents?runbook=nope", **bearer()).status_code == 400
    unknown = get(token_bot, "/incidents?sort=id", **bearer())
    assert unknown.status_code == 400 and "valid: state, runbook, layer" in unknown.text


def test_incident_page_is_live_while_open_and_unknown_refs_are_404(token_bot: Bot) -> None:
    page = get(token_bot, "/incidents/INC-1", **bearer())
    assert page.status_code == 200
    assert '<meta http-equiv="refresh" content="30">' in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert 'id="metric-chart"' in page.text
    assert get(token_bot, "/incidents/INC-99", **bearer()).status_code == 404
    assert get(token_bot, "/incidents/INC-1/raw", **bearer()).status_code == 404
    assert get(token_bot, "/incidents/7", **bearer()).status_code == 404
    assert token_bot.http.post("/incidents", headers=bearer()).status_code == 405


def test_an_unset_token_refuses_every_page(tmp_path: Path, scenario_dir: Path) -> None:
    settings = settings_for(tmp_path, PagesSettings(auth="token"))
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot:
        assert get(bot, "/incidents").status_code == 401
        assert get(bot, "/incidents", **bearer("anything")).status_code == 401


def test_proxy_mode_honours_only_the_configured_header(tmp_path: Path, scenario_dir: Path) -> None:
    pages = PagesSettings(auth="proxy", proxy_header="X-Auth-Request-User")
    settings = settings_for(tmp_path, pages)
    with running_bot(settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as bot:
        assert get(bot, "/incidents", **{"X-Auth-Request-User": "alice"}).status_code == 200
        assert get(bot, "/incidents", **{"X-Auth-Request-User": ""}).status_code == 401
        assert get(bot, "/incidents", **{"X-Forwarded-User": "alice"}).status_code == 401
        assert get(bot, "/incidents").status_code == 401

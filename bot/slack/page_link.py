"""The incident-page link a Slack message carries, and how the people in the channel open it.

Under `pages.auth: token` (the default) a browser has no bearer token, so the link is signed for
that one page and expires after `pages.link_minutes` (`bot.incidents.page_links`; the page checks
it). Under `proxy` the link is plain and the reader signs in through the proxy; under `none` it
is plain. Without `pages.base_url` there is no link.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.config import PagesSettings
from bot.incidents.page_links import signed_query


@dataclass(frozen=True)
class PageLink:
    url: str | None
    auth: str
    """`none`, `proxy`, `token` (no token set: the link cannot open) or `signed`."""
    until: datetime | None = None


def page_link(pages: PagesSettings, ref: str, *, now: datetime) -> PageLink:
    url = pages.incident_url(ref)
    if url is None or pages.auth != "token" or pages.token is None:
        return PageLink(url, pages.auth)
    until = now + timedelta(minutes=pages.link_minutes)
    query = signed_query(ref, key=pages.token.get_secret_value(), expires=until)
    return PageLink(f"{url}?{query}", "signed", until)

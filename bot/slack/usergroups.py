"""Slack user-group membership for the approver policy, cached briefly.

Approvers may be user-group ids (`S...`). Membership comes from `usergroups.users.list`
(scope `usergroups:read`) and is cached for `usergroup_cache_seconds`, so a burst of clicks costs
one call per group while a change in the group takes effect within a minute.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.errors import PolicyDenied

GROUP_ID = re.compile(r"^S[A-Z0-9]{2,}$")


def group_ids(approvers: Collection[str]) -> list[str]:
    """The entries of an approver list that are Slack user-group ids."""
    return sorted(a for a in approvers if GROUP_ID.match(a))


class UserGroups:
    """Which of some user groups a user belongs to, from a cache refreshed every `ttl` seconds."""

    def __init__(self, client: WebClient, *, ttl: float, monotonic: Callable[[], float]) -> None:
        self.client, self.ttl, self.monotonic = client, ttl, monotonic
        self._lock = threading.Lock()
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    def groups_of(self, user: str, *, among: Collection[str]) -> frozenset[str]:
        """The groups in `among` (group ids) that list `user` as a member."""
        return frozenset(group for group in group_ids(among) if user in self.members(group))

    def members(self, group: str) -> frozenset[str]:
        now = self.monotonic()
        with self._lock:
            cached = self._members.get(group)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        try:
            response = self.client.usergroups_users_list(usergroup=group)
        except SlackApiError as exc:
            error = exc.response.get("error", "unknown error")
            raise PolicyDenied(
                f"cannot read the members of approver group {group} ({error}); check that the "
                "app has the usergroups:read scope and that the group id is right"
            ) from exc
        listed: list[str] = list(response.get("users") or [])
        users = frozenset(listed)
        with self._lock:
            self._members[group] = (now, users)
        return users

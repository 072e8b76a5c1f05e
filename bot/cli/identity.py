"""Who a person on the command line is: the operating-system user, or the configured
`identity.cli_user`; acting as someone else (`approve --as`) needs an admin role.

Kept free of heavy imports: `bot.cli.main` imports it at start-up.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Collection

from bot.actions.policy import ADMIN_MARK, cli_actor_name
from bot.errors import PolicyDenied


def cli_identity(*, configured: str | None) -> str:
    """`cli:<user>`: the configured identity, else the operating-system user."""
    return cli_actor_name(configured or getpass.getuser())


def acting_actor(*, user: str, acting_as: str | None, admins: Collection[str]) -> str:
    """The actor a decision is recorded under: `user`, or `user as <other> (admin)` when an
    admin acts for someone else. Anyone else asking to act as another is refused."""
    if not acting_as:
        return user
    slack_id = re.fullmatch(r"[UW][A-Z0-9]{2,}", acting_as) is not None
    other = acting_as if ":" in acting_as or slack_id else cli_actor_name(acting_as)
    if other == user:
        return user
    if user not in admins:
        shown = ", ".join(sorted(admins)) or "none configured"
        raise PolicyDenied(
            f"{user} may not act as {other}: --as needs the admin role "
            f"(GPU_ONCALL_IDENTITY__ADMINS; admins: {shown}); approve as yourself instead"
        )
    return f"{user} as {other}{ADMIN_MARK}"

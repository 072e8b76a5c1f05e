"""Validation of names that cross into PromQL or Kubernetes calls, and node-range expansion.

Every node name from Slack, the CLI, YAML or an alert label passes `check_node_name` before any
adapter sees it: a DNS-1123 subdomain, as Kubernetes requires of node names.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

from integrations.errors import InvalidName

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_RANGE = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<lo>\d+)-(?P<hi>\d+)\](?P<suffix>[^\[\]]*)$")


def check_node_name(name: str) -> str:
    """Return `name` if it is a valid Kubernetes node name, else raise InvalidName."""
    if not isinstance(name, str) or not name:
        raise InvalidName("node name is empty")
    if len(name) > 253:
        raise InvalidName(f"node name is longer than 253 characters: '{name[:40]}...'")
    if not _DNS1123_SUBDOMAIN.match(name):
        raise InvalidName(
            f"invalid node name '{name}': use lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return name


NodeName = Annotated[str, AfterValidator(check_node_name)]


def expand_nodes(spec: str | list[str]) -> list[str]:
    """Expand `gpu-node-[08-15]` (zero padding kept) or a list of such items into node names."""
    items = [spec] if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for item in items:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            match = _RANGE.match(part)
            if match is None:
                names.append(check_node_name(part))
                continue
            lo, hi = match["lo"], match["hi"]
            if int(lo) > int(hi):
                raise InvalidName(f"node range '{part}' goes backwards")
            width = len(lo)
            for index in range(int(lo), int(hi) + 1):
                names.append(
                    check_node_name(f"{match['prefix']}{index:0{width}d}{match['suffix']}")
                )
    return names

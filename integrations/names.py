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
_RANGE = re.compile(
    r"^(?P<prefix>[^\[\]]*)\[(?P<lo>\d{1,9})-(?P<hi>\d{1,9})\](?P<suffix>[^\[\]]*)$"
)


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

_DNS1123_LABEL_RE = re.compile(rf"^{_DNS1123_LABEL}$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MAX_ANNOTATION_BYTES = 256 * 1024


def _shown(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:40]}..."


def _check_subdomain(name: object, *, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidName(f"{what} is empty")
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        raise InvalidName(
            f"invalid {what} '{_shown(name)}': use at most 253 lower-case letters, digits, '-' "
            "and '.', starting and ending with a letter or digit"
        )
    return name


def _check_label(name: object, *, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidName(f"{what} is empty")
    if len(name) > 63 or not _DNS1123_LABEL_RE.match(name):
        raise InvalidName(
            f"invalid {what} '{_shown(name)}': use at most 63 lower-case letters, digits and "
            "'-', starting and ending with a letter or digit"
        )
    return name


def check_pod_name(name: str) -> str:
    """A pod name: a DNS-1123 subdomain, as Kubernetes requires."""
    return _check_subdomain(name, what="pod name")


def check_namespace(name: str) -> str:
    """A namespace: a DNS-1123 label (at most 63 characters)."""
    return _check_label(name, what="namespace")


def check_job_name(name: str) -> str:
    """A Job name: a DNS-1123 label (its pods carry it in the `job-name` label)."""
    return _check_label(name, what="job name")


def check_container_name(name: str) -> str:
    """A container name: a DNS-1123 label."""
    return _check_label(name, what="container name")


def check_qualified_key(key: str, *, what: str = "label key") -> str:
    """A label, annotation or taint key: `[prefix/]name`, the prefix a DNS-1123 subdomain and
    the name at most 63 characters of letters, digits, '-', '_' and '.'."""
    if not isinstance(key, str) or not key:
        raise InvalidName(f"{what} is empty")
    prefix, slash, name = key.rpartition("/")
    if slash:
        _check_subdomain(prefix, what=f"{what} prefix")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise InvalidName(
            f"invalid {what} '{_shown(key)}': use [prefix/]name, the name at most 63 letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return key


def check_label_value(value: str, *, what: str = "label value") -> str:
    """A label (or taint) value: empty, or at most 63 letters, digits, '-', '_' and '.'."""
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise InvalidName(
            f"invalid {what} '{_shown(str(value))}': use at most 63 letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit"
        )
    return value


def check_annotation_value(value: str) -> str:
    """An annotation value: any text up to 256 KiB."""
    if not isinstance(value, str) or len(value.encode()) > _MAX_ANNOTATION_BYTES:
        raise InvalidName("annotation value must be text of at most 256 KiB")
    return value


def check_taint_effect(effect: str) -> str:
    if effect not in TAINT_EFFECTS:
        effects = ", ".join(TAINT_EFFECTS)
        raise InvalidName(f"invalid taint effect '{_shown(str(effect))}' (effects: {effects})")
    return effect


MAX_NODES = 4096
"""Most node names one input may expand to (`gpu-node-[0-99999]` is refused before expanding)."""


def expand_nodes(spec: str | list[str], *, limit: int = MAX_NODES) -> list[str]:
    """Expand `gpu-node-[08-15]` (zero padding kept) or a list of such items into node names.

    Raises InvalidName when the names would number more than `limit`, counted before any
    range is expanded, so a huge range costs no memory.
    """
    items = [spec] if isinstance(spec, str) else list(spec)
    parts = [p.strip() for item in items for p in item.split(",") if p.strip()]
    _check_count(parts, limit=limit)
    names: list[str] = []
    for part in parts:
        match = _RANGE.match(part)
        if match is None:
            names.append(check_node_name(part))
            continue
        lo, hi = match["lo"], match["hi"]
        width = len(lo)
        for index in range(int(lo), int(hi) + 1):
            names.append(check_node_name(f"{match['prefix']}{index:0{width}d}{match['suffix']}"))
    return names


def _check_count(parts: list[str], *, limit: int) -> None:
    """Refuse backward ranges, and a total beyond `limit`, without expanding anything."""
    total = 0
    for part in parts:
        match = _RANGE.match(part)
        if match is None:
            total += 1
            continue
        lo, hi = int(match["lo"]), int(match["hi"])
        if lo > hi:
            raise InvalidName(f"node range '{part}' goes backwards")
        total += hi - lo + 1
    if total > limit:
        shown = parts[0] if len(parts) == 1 else f"{parts[0]},..."
        raise InvalidName(
            f"'{shown[:80]}' names {total} nodes; at most {limit} per input "
            "(split the range, or run per rack)"
        )

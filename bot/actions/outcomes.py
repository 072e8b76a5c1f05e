"""Whether a run's approved actions were carried out fully, and what was and was not done, in
one line (pure): the CLI's exit code (1: acted, not fully), the incident's state reason, the
verification's skip reason and the Slack summary all read it, so they never disagree.

Done: `changed` / `already_done` (and a dry run). Not done: `failed` (an API error, RBAC).
`blocked` (a safety limit held it back: over to humans, the incident back in triage),
`refused`, `cancelled` and `skipped` did nothing on purpose: they are listed under "not done"
but do not make the run "acted, not fully".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

DONE = ("changed", "already_done", "dry_run")
NOT_DONE = ("failed",)


def action_results(steps: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every action result of the run's act steps, in order."""
    return [
        result
        for output in steps.values()
        if isinstance(output, Mapping) and output.get("kind") == "act"
        for result in output.get("results") or ()
    ]


def not_fully_done(results: Iterable[Mapping[str, Any]]) -> bool:
    """Some approved action failed (the run acted, but not fully)."""
    return any(r.get("outcome") in NOT_DONE for r in results)


def partly_done(results: Iterable[Mapping[str, Any]]) -> bool:
    """Some action was carried out and some was not: the node is in between."""
    found = list(results)
    return not_fully_done(found) and any(r.get("outcome") in DONE for r in found)


def describe(results: Iterable[Mapping[str, Any]]) -> str:
    """`done: gpu-node-03 cordoned; not done: drain gpu-node-03 failed: ...` (either part may be
    missing; "" when there were no actions)."""
    found = list(results)
    done = [_detail(r) for r in found if r.get("outcome") in DONE]
    not_done = [_detail(r) for r in found if r.get("outcome") not in DONE]
    parts = ([f"done: {'; '.join(done)}"] if done else []) + (
        [f"not done: {'; '.join(not_done)}"] if not_done else []
    )
    return " | ".join(parts)


def _detail(result: Mapping[str, Any]) -> str:
    detail = " ".join(str(result.get("detail") or "").split())
    return detail or f"{result.get('action')} {result.get('target')}: {result.get('outcome')}"

"""A runbook's approval policy: its YAML `policy:` block over the settings' defaults.

The engine asks here, never the settings directly, wherever approval is decided (propose:
whether to ask and until when; resume: who may approve), so a runbook's overrides hold on
every path and are named in the approval message.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.actions.policy import Policy, Risk, RunbookPolicy, effective_policy
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import PolicySpec
from bot.engine.steps.common import parse_duration


def runbook_policy(name: str, spec: PolicySpec | None) -> RunbookPolicy | None:
    """The pure policy record of a runbook's `policy:` block (None: it has none)."""
    if spec is None:
        return None
    return RunbookPolicy(
        runbook=name,
        approvers=None if spec.approvers is None else frozenset(spec.approvers),
        groups=None if spec.groups is None else frozenset(spec.groups),
        approval_risks=_risks(spec.approval_risks),
        two_person_risks=_risks(spec.two_person_risks),
        auto_approve=(
            None
            if spec.auto_approve is None
            else {rule.action: rule.max_targets for rule in spec.auto_approve}
        ),
        approval_ttl=None if spec.expiry is None else parse_duration(spec.expiry),
    )


def policy_for(policy: Policy, loaded: LoadedRunbook | None) -> Policy:
    """The policy that governs `loaded`'s approvals (the settings' when it is None)."""
    if loaded is None:
        return policy
    return effective_policy(policy, runbook_policy(loaded.name, loaded.runbook.policy))


def _risks(names: Sequence[str] | None) -> frozenset[Risk] | None:
    return None if names is None else frozenset(Risk(n) for n in names)

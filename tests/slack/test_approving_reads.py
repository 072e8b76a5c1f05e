"""One Slack click, one read of the approval and one resolution of the policy (the approval use
case, bot/engine/approving.py), over the bot's real HTTP server and the fake Slack Web API.

Covers: an Approve click by a member of an approver user group reads the approval rows once
and resolves the policy once while deciding (the group is looked up among the approvers that
one policy named: one `usergroups.users.list` call, cached), and the run goes on; the drain
the run asks for again at its deadline is decided the same way from the same message; a click
after that is told who approved, from its one read, resolves no policy and runs nothing again.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from servers.slack_harness import CAROL, SlackHarness

from bot.slack.approving import Approvals
from tests.engine.approval_reads import Tally, counting

NODE = "gpu-node-03"
Start = Callable[..., SlackHarness]


def test_a_click_reads_the_approval_once_and_resolves_the_policy_once(
    start_bot: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counting(monkeypatch, [(Approvals, "decide")]) as tally:
        harness = start_bot(approvers=["S0ONCALL"])  # built inside: the adapter binds the policy
        ts = harness.triage_alert()
        asked = harness.message(ts)
        costs = [_cost(harness, tally, asked) for _click in range(3)]
    assert costs[:2] == [(1, 1), (1, 1)]  # the approval, then the drain asked for again
    assert costs[2] == (1, 0)  # nothing pending: told who decided, no policy needed
    assert harness.rt.fleet is not None
    assert (harness.rt.fleet.cordon_calls[NODE], harness.rt.fleet.drain_calls[NODE]) == (1, 1)
    assert [c.body["usergroup"] for c in harness.fake.of("usergroups.users.list")] == ["S0ONCALL"]
    replies = [r.text for r in harness.fake.of("response_url")]
    assert len(replies) == 1 and "already approved by <@U0CAROL>" in replies[0]


def _cost(harness: SlackHarness, tally: Tally, message: object) -> tuple[int, int]:
    """(approval SELECTs, policy resolutions) of one Approve click on `message`, run to its end."""
    selects, policies = tally.totals()
    harness.click("approve", message, user=CAROL)  # type: ignore[arg-type]
    harness.settle()
    after = tally.totals()
    return after[0] - selects, after[1] - policies

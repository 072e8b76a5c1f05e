"""The drain plan survives a SIGKILL of `serve` between the cordon and the drain.

`serve` on the simulated fleet with every risk auto-approved triages an ECC storm on
gpu-node-03 and carries out "cordon now, drain after the next checkpoint" itself
(bot/engine/deferred.py): the cordon, then the RMA ticket, whose webhook on 127.0.0.1 holds
the request, so the kill lands after the cordon and before the drain, at a point the test
observes (never a timing guess). A new `serve` takes the run over from its checkpoint, waits
for the job's next checkpoint (on simulated time the wait passes at once; on wall-clock time it
is a durable timer row, tests/actions/test_drain_after_checkpoint.py) and drains exactly once:
one cordon and one drain in the fleet's journal, each action succeeded once, the plan announced
once on the timeline.
"""

from __future__ import annotations

from journeys.test_crash_serve import (
    NODE,
    Bot,
    bot,
    end_state,
    incident_state,
    kill,
    post_alert,
    ticket_desk,
    wait_until,
)
from sqlmodel import select

from storage.db import make_engine, session_scope
from storage.tables import TimelineEvent

__all__ = ["bot"]  # the fixture, shared with the serve crash tests


def test_serve_killed_between_the_cordon_and_the_drain_drains_once(bot: Bot) -> None:
    with ticket_desk() as (desk, tickets):
        bot.extra_env["GPU_ONCALL_TICKETS__WEBHOOK_URL"] = tickets
        bot.extra_env["GPU_ONCALL_POLICY__AUTO_APPROVE_RISKS"] = '["low", "medium", "high"]'
        post_alert(bot.serve())
        assert desk.arrived.wait(90.0), "serve never reached the ticket action"
        crashed = end_state(bot)
        assert crashed["writes"] == {("cordon", NODE): 1}  # cordoned; the drain waits
        kill(bot.procs[0])
        desk.hold = False
        desk.release.set()
        url = bot.serve()
        wait_until(bot, "the drain is carried out", incident_state("monitoring"))
        post_alert(url, status="resolved")
        wait_until(bot, "the incident resolves", incident_state("resolved"))
        state = end_state(bot)
        assert state["writes"] == {("cordon", NODE): 1, ("drain", NODE): 1}
        assert state["actions"] == [
            ("cordon", NODE, "succeeded"),
            ("drain", NODE, "succeeded"),
            ("open_ticket", NODE, "succeeded"),
        ]
        assert state["taken_over"]
        assert len(set(desk.keys)) == 1
        engine = make_engine(bot.db_url)
        with session_scope(engine) as session:
            lines = [e.summary for e in session.exec(select(TimelineEvent))]
        engine.dispose()
        assert len([s for s in lines if s.startswith(f"Drain of {NODE} scheduled after")]) == 1
        assert len([s for s in lines if "drained" in s and "after the next checkpoint" in s]) == 1

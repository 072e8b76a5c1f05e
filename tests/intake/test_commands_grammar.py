"""The `/gpu` grammar (bot.intake.commands), pure.

Covers: every verb of DESIGN §9 parses to its typed command; empty text is help; runbook verbs
(`/gpu ecc <node>`) run their runbook; node-typed inputs cross the Kubernetes name rule;
key=value inputs are checked (shape, key, repeats); incident ids and MTTR windows are checked;
Slack's escaping and curly quotes are undone; every refusal names what is valid.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.errors import UserInputError
from bot.intake.commands import (
    VERBS,
    Ack,
    Breaker,
    Diagnose,
    Help,
    ListIncidents,
    ListRunbooks,
    Mttr,
    PauseActions,
    Postmortem,
    ResumeActions,
    RunbookSyntax,
    RunRunbook,
    ShowIncident,
    parse_command,
    parse_pairs,
)

RUNBOOKS = (
    RunbookSyntax("ecc-storm", "node", frozenset({"node"}), ("ecc",)),
    RunbookSyntax("nccl-hang", "job", frozenset(), ("nccl",)),
    RunbookSyntax("node-diagnose", "node", frozenset({"node"}), ()),
)


def parse(text: str) -> object:
    return parse_command(text, runbooks=RUNBOOKS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("diagnose gpu-node-07", Diagnose("gpu-node-07")),
        ("DIAGNOSE gpu-node-07", Diagnose("gpu-node-07")),
        (
            "run ecc-storm node=gpu-node-03 window=30m",
            RunRunbook("ecc-storm", {"node": "gpu-node-03", "window": "30m"}),
        ),
        ("run nccl-hang job=llm-pretrain", RunRunbook("nccl-hang", {"job": "llm-pretrain"})),
        ("incidents", ListIncidents()),
        ("incidents all", ListIncidents(include_resolved=True)),
        ("incident INC-42", ShowIncident(42)),
        ("incident inc-7", ShowIncident(7)),
        ("ack 42", Ack(42)),
        ("postmortem INC-42", Postmortem(42)),
        ("mttr", Mttr(timedelta(days=7), "7d")),
        ("mttr 24h", Mttr(timedelta(hours=24), "24h")),
        ("mttr 2w", Mttr(timedelta(weeks=2), "2w")),
        ("runbooks", ListRunbooks()),
        ("help", Help()),
        ("", Help()),
        ("   ", Help()),
        ("breaker reset", Breaker("reset")),
        ("breaker status", Breaker("status")),
        ("breaker reset checked the racks", Breaker("reset", "checked the racks")),
        ("pause firmware rollout", PauseActions("firmware rollout")),
        ("resume", ResumeActions()),
    ],
)
def test_each_verb_parses_to_its_command(text: str, expected: object) -> None:
    assert parse(text) == expected


def test_runbook_verb_takes_the_target_first_then_inputs() -> None:
    assert parse("ecc gpu-node-03 window=1h") == RunRunbook(
        "ecc-storm", {"node": "gpu-node-03", "window": "1h"}
    )
    assert parse("nccl llm-pretrain") == RunRunbook("nccl-hang", {"job": "llm-pretrain"})


def test_unknown_verb_replies_with_the_valid_verbs() -> None:
    with pytest.raises(UserInputError) as exc:
        parse("reboot gpu-node-03")
    message = str(exc.value)
    assert "unknown command 'reboot'" in message
    assert ", ".join(VERBS) in message and "ecc" in message and "nccl" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("diagnose", "/gpu diagnose takes one argument, <node> (got nothing)"),
        ("diagnose a b", "takes one argument, <node> (got 'a b')"),
        ("diagnose Gpu_Node", "invalid node name 'Gpu_Node'"),
        ("diagnose gpu-node-", "starting and ending with a letter or digit"),
        ("run", "/gpu run needs a runbook (runbooks: ecc-storm, nccl-hang, node-diagnose)"),
        ("run nope", "unknown runbook 'nope' (runbooks: ecc-storm, nccl-hang, node-diagnose)"),
        ("run ecc-storm gpu-node-03", "'gpu-node-03' is not key=value (e.g. node=gpu-node-07"),
        ("run ecc-storm node=", "'node=' is not key=value"),
        ("run ecc-storm Node=x", "'Node=x' is not key=value"),
        ("run ecc-storm node=a node=b", "input 'node' is given twice"),
        ("run ecc-storm node=BAD_NAME", "ecc-storm: input 'node': invalid node name 'BAD_NAME'"),
        ("ecc", "/gpu ecc needs a node: /gpu ecc <target>"),
        ("ecc node=gpu-node-03", "/gpu ecc needs a node"),
        ("incident", "takes one argument, <id>"),
        ("incident 42x", "'42x' is not an incident id (use INC-42 or 42"),
        ("ack INC-0", "'INC-0' is not an incident id"),
        ("incidents open", "/gpu incidents takes no argument or 'all'"),
        ("mttr 7", "'7' is not a window (a duration such as 90m, 24h, 7d, 2w)"),
        ("mttr 0d", "window '0d' must be more than 0"),
        ("mttr 400d", "at most 366d"),
        ("mttr 7d 24h", "/gpu mttr takes one window"),
        ("runbooks all", "/gpu runbooks takes no arguments (got 'all')"),
        ("breaker", "/gpu breaker takes status or reset [reason]"),
        ("breaker open", "/gpu breaker takes status or reset [reason]"),
        ("pause", "/gpu pause needs a reason"),
        ("resume now", "/gpu resume takes no arguments"),
        ('run ecc-storm note="unterminated', "cannot read the command"),
    ],
)
def test_bad_input_says_what_is_valid(text: str, fragment: str) -> None:
    with pytest.raises(UserInputError) as exc:
        parse(text)
    assert fragment in str(exc.value)


def test_slack_escaping_and_curly_quotes_are_undone() -> None:
    parsed = parse("run ecc-storm node=gpu-node-03 note=\u201cECC &amp; XID 48\u201d")
    assert parsed == RunRunbook("ecc-storm", {"node": "gpu-node-03", "note": "ECC & XID 48"})


def test_without_runbook_knowledge_run_accepts_any_runbook() -> None:
    assert parse_command("run custom-book x=1") == RunRunbook("custom-book", {"x": "1"})


def test_pairs_are_shared_with_the_cli() -> None:
    assert parse_pairs(["node=gpu-node-03", "window=15m"]) == {
        "node": "gpu-node-03",
        "window": "15m",
    }
    with pytest.raises(UserInputError, match="input 'x' is not key=value"):
        parse_pairs(["x"])

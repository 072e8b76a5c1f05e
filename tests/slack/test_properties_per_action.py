"""Generated input for what this change renders and parses (hypothesis).

Covers: the 3 a.m. triage message and its details reply never pass generated text from a
proposal (action, description, reason, impact), the culprit or a finding to mrkdwn unescaped;
each waiting action gets exactly one button of its own when several wait, and none when one
does; a culprit's GPU UUID and each node's impact line appear once however many actions touch
the node, and the recommendation (drain now or wait) once and only while a drain is proposed;
the `/gpu action` / `/gpu section` grammar gives back what was typed, and anything
else is a UserInputError, never another exception.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_blocks_rendering import T0, VERDICT, view
from test_blocks_untrusted_text import mrkdwn_texts

from bot.errors import UserInputError
from bot.intake import commands as grammar
from bot.slack.blocks import ApprovalState, details_blocks, triage_blocks

TAIL = st.text(max_size=30)
NAMES = st.lists(
    st.sampled_from(["cordon", "drain", "open_ticket"])
    | st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    min_size=1,
    max_size=6,
)


def impact(node: str, tail: str) -> dict[str, Any]:
    return {
        "node": node,
        "pool": "<zzpool" + tail + ">",
        "jobs": [],
        "spares": [],
        "recommendation": "cordon and let it checkpoint",
        "reason": "<zzwhy" + tail + ">",
    }


@settings(max_examples=60, deadline=None)
@given(names=NAMES, tail=TAIL)
def test_generated_proposals_are_escaped_and_each_waiting_action_has_one_button(
    names: list[str], tail: str
) -> None:
    hostile = "<zz" + tail + ">"
    proposals = tuple(
        {
            "action": name,
            "target": "gpu-node-03",
            "risk": ["low", "medium", "high"][i % 3],
            "description": f"{name} {hostile}",
            "reason": hostile,
            "impact": impact("gpu-node-03", tail),
        }
        for i, name in enumerate(names)
    )
    verdict = dict(
        VERDICT,
        layer=hostile,
        culprit_details=[{"node": hostile, "gpu": "5", "uuid": "GPU-" + tail}],
        detectors=[hostile],
        findings=[dict(VERDICT["findings"][0], summary=hostile)],
    )
    triage = view(proposals=proposals, verdict=verdict)
    blocks = triage_blocks(triage)
    for text in [*mrkdwn_texts(blocks), *mrkdwn_texts(details_blocks(triage))]:
        assert "<zz" not in text
    distinct = list(dict.fromkeys(names))
    own = [b["accessory"] for b in blocks if "accessory" in b]
    assert [json.loads(b["value"])["only"] for b in own] == (distinct if len(distinct) > 1 else [])
    visible = "\n".join(mrkdwn_texts(blocks))
    assert visible.count("Impact:") == 1  # one node, however many actions touch it
    assert visible.count("Recommendation:") == (1 if "drain" in names else 0)


@settings(max_examples=40, deadline=None)
@given(uuid=st.text("0123456789abcdef", min_size=8, max_size=36), actions=st.integers(1, 5))
def test_the_culprit_uuid_is_shown_once(uuid: str, actions: int) -> None:
    token = f"GPU-{uuid}"
    verdict = dict(VERDICT, culprit_details=[{"node": "gpu-node-03", "gpu": "5", "uuid": token}])
    proposals = tuple(
        {"action": f"a{i}", "target": "gpu-node-03", "risk": "medium", "description": f"a{i}"}
        for i in range(actions)
    )
    rest = ApprovalState("pending", T0 + timedelta(minutes=30))
    text = "\n".join(
        mrkdwn_texts(triage_blocks(view(verdict=verdict, proposals=proposals, approval=rest)))
    )
    assert text.count(token) == 1


OWNER = st.from_regex(r"\A[a-z][a-z0-9._-]{0,20}\Z")
WORDS = st.lists(st.from_regex(r"\A[A-Za-z0-9,.:>&]{1,12}\Z"), min_size=1, max_size=8)


@settings(max_examples=80, deadline=None)
@given(
    number=st.integers(1, 10**6),
    owner=OWNER,
    due=st.none() | st.dates(date(2000, 1, 1), date(2099, 12, 31)),
    words=WORDS,
)
def test_action_items_parse_back_to_what_was_typed(
    number: int, owner: str, due: date | None, words: list[str]
) -> None:
    if words[0].lower() == "due":
        words = ["to", *words]
    when = f"due {due.isoformat()} " if due else ""
    parsed = grammar.parse_command(f"action INC-{number} @{owner} {when}{' '.join(words)}")
    assert parsed == grammar.ActionItem(number, "@" + owner, " ".join(words), due)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(grammar.POSTMORTEM_SECTIONS),
    dashed=st.booleans(),
    upper=st.booleans(),
    words=WORDS,
)
def test_sections_parse_as_typed_with_dashes_or_underscores(
    name: str, dashed: bool, upper: bool, words: list[str]
) -> None:
    typed = name.replace("_", "-") if dashed else name
    typed = typed.upper() if upper else typed
    parsed = grammar.parse_command(f"section 7 {typed} {' '.join(words)}")
    assert parsed == grammar.Section(7, name, " ".join(words))


@settings(max_examples=150, deadline=None)
@given(verb=st.sampled_from(["action", "section"]), rest=st.text(max_size=80))
def test_anything_else_is_a_user_error(verb: str, rest: str) -> None:
    try:
        parsed = grammar.parse_command(f"{verb} {rest}")
    except UserInputError as exc:
        assert str(exc)
        return
    assert isinstance(parsed, grammar.ActionItem | grammar.Section)
    assert parsed.text.strip()


def test_a_mention_is_an_owner_and_a_bare_name_is_not() -> None:
    assert grammar.parse_owner("<@U0CAROL|carol>") == "U0CAROL"
    assert grammar.parse_owner("<@U0CAROL>") == "U0CAROL"
    with pytest.raises(UserInputError, match="'carol' is not an owner"):
        grammar.parse_owner("carol")

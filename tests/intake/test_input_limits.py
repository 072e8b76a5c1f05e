"""Bounded inputs: every outside input has a documented cap and is refused, past it, with one
message naming the input, its size and the cap (docs/operations.md, "Input limits").

Covers: a node range beyond `MAX_NODES` is refused before anything is expanded (and exactly the
cap is accepted); a webhook with more than `MAX_ALERTS_PER_WEBHOOK` alerts, too many labels, a
label name or value, or an annotation value past its cap is refused naming the field
(`alerts.0.labels`); through the running server such a webhook gets 400 naming the field and
nothing is stored; a `/gpu` command longer than `MAX_COMMAND_CHARS`, or with more than
`MAX_INPUTS` inputs, is refused.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from servers.oncall import Bot, alert, row_counts, running_bot, webhook

from bot.config import Settings
from bot.errors import UserInputError
from bot.intake.alerts import (
    MAX_ALERTS_PER_WEBHOOK,
    MAX_ANNOTATION_VALUE_CHARS,
    MAX_KEY_CHARS,
    MAX_KEYS,
    MAX_LABEL_VALUE_CHARS,
    InvalidWebhookError,
    parse_webhook,
)
from bot.intake.commands import MAX_COMMAND_CHARS, MAX_INPUTS, parse_command
from integrations.errors import InvalidName
from integrations.names import MAX_NODES, expand_nodes


def test_node_range_beyond_the_cap_is_refused_naming_the_range_and_the_cap() -> None:
    with pytest.raises(InvalidName) as refused:
        expand_nodes("gpu-node-[0-99999]")
    assert str(refused.value).startswith("'gpu-node-[0-99999]' names 100000 nodes")
    assert f"at most {MAX_NODES}" in str(refused.value)
    with pytest.raises(InvalidName, match="names 4097 nodes"):
        expand_nodes(["gpu-node-[0000-4095]", "gpu-node-x"])
    assert len(expand_nodes(f"gpu-node-[0001-{MAX_NODES}]")) == MAX_NODES


def test_huge_range_bounds_are_not_a_range() -> None:
    with pytest.raises(InvalidName, match="invalid node name 'gpu-node-\\[0-9999999999\\]'"):
        expand_nodes("gpu-node-[0-9999999999]")
    with pytest.raises(InvalidName, match="longer than 253 characters"):
        expand_nodes("gpu-node-[0-" + "9" * 5000 + "]")


def one_alert(**changes: Any) -> dict[str, Any]:
    base = {
        "status": "firing",
        "labels": {"alertname": "GPUEccStorm", "Hostname": "gpu-node-03"},
        "startsAt": "2026-01-01T00:00:00Z",
    }
    return base | changes


def body(alerts: list[dict[str, Any]], **changes: Any) -> str:
    hook = {"version": "4", "groupKey": "g", "status": "firing", "receiver": "r", "alerts": alerts}
    return json.dumps(hook | changes)


@pytest.mark.parametrize(
    ("raw", "field", "problem"),
    [
        (
            body([one_alert()] * (MAX_ALERTS_PER_WEBHOOK + 1)),
            "alerts",
            f"{MAX_ALERTS_PER_WEBHOOK + 1} alerts in one webhook; at most {MAX_ALERTS_PER_WEBHOOK}",
        ),
        (
            body([one_alert(labels={f"k{i}": "v" for i in range(MAX_KEYS + 1)})]),
            "alerts.0.labels",
            f"{MAX_KEYS + 1} labels; at most {MAX_KEYS}",
        ),
        (
            body([one_alert(labels={"k" * (MAX_KEY_CHARS + 1): "v"})]),
            "alerts.0.labels",
            f"has {MAX_KEY_CHARS + 1} characters; at most {MAX_KEY_CHARS}",
        ),
        (
            body([one_alert(labels={"Hostname": "h" * (MAX_LABEL_VALUE_CHARS + 1)})]),
            "alerts.0.labels",
            f"label 'Hostname' has a value of {MAX_LABEL_VALUE_CHARS + 1} characters",
        ),
        (
            body([one_alert(annotations={"description": "d" * (MAX_ANNOTATION_VALUE_CHARS + 1)})]),
            "alerts.0.annotations",
            f"at most {MAX_ANNOTATION_VALUE_CHARS}",
        ),
        (
            body([one_alert()], commonLabels={"x" * (MAX_KEY_CHARS + 1): "v"}),
            "commonLabels",
            f"at most {MAX_KEY_CHARS}",
        ),
    ],
)
def test_oversized_webhook_is_refused_naming_the_field(raw: str, field: str, problem: str) -> None:
    with pytest.raises(InvalidWebhookError) as refused:
        parse_webhook(raw)
    assert refused.value.field == field
    assert problem in refused.value.problem


def test_webhook_at_the_caps_is_accepted() -> None:
    labels = {f"k{i}": "v" * MAX_LABEL_VALUE_CHARS for i in range(MAX_KEYS)}
    parsed = parse_webhook(body([one_alert(labels=labels)] * 3))
    assert len(parsed.alerts) == 3


@pytest.fixture
def bot(bot_settings: Settings, scenario_dir: Path) -> Bot:  # type: ignore[misc]
    with running_bot(bot_settings, scenario=scenario_dir / "ecc-dbe-storm.yaml") as running:
        yield running


def test_server_answers_400_naming_the_oversized_field_and_stores_nothing(bot: Bot) -> None:
    starts = bot.rt.fleet.t0 - timedelta(minutes=10)
    good = alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)
    bad = alert("GPUEccStorm", {"Hostname": "gpu-node-04", "note": "x" * 5000}, starts_at=starts)
    response = bot.post_alerts(webhook([good, bad]))
    assert response.status_code == 400
    assert response.json()["field"] == "alerts.1.labels"
    assert "at most 4096" in response.json()["error"]
    assert row_counts(bot.rt.db)["alerts"] == 0


def test_command_text_and_inputs_are_capped() -> None:
    with pytest.raises(UserInputError, match=f"at most {MAX_COMMAND_CHARS}"):
        parse_command("run node-storm nodes=" + "a" * MAX_COMMAND_CHARS)
    pairs = " ".join(f"k{i}=v" for i in range(MAX_INPUTS + 1))
    with pytest.raises(UserInputError, match=f"{MAX_INPUTS + 1} inputs given; at most"):
        parse_command(f"run node-storm {pairs}")

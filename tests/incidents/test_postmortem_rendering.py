"""Postmortem export.

Covers: the Markdown title line names the incident, runbook, target, severity and state; it
shows the localization, the figures with their formulas, and the timeline (time UTC, actor,
kind, summary); `pinned_only` keeps the curated story; table cells are escaped; JSON follows
the documented schema with figures in seconds and round-trips back into equal views; corrupt
timestamps degrade to a message instead of figures; unknown formats list the valid ones;
`read_postmortem` names an unknown incident; the renderer imports no database library.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from bot.clock import FakeClock
from bot.errors import NotFound, UserInputError
from bot.incidents import lifecycle
from bot.incidents.postmortem import parse_postmortem_json, render_postmortem
from bot.incidents.reporting import read_postmortem, read_views
from bot.incidents.states import IncidentState
from bot.incidents.views import EventView, IncidentView
from storage.db import session_scope


@pytest.fixture
def resolved(engine: Engine, clock: FakeClock) -> tuple[IncidentView, list[EventView]]:
    """An ECC incident that went through the whole journey, read back as views."""
    with session_scope(engine) as session:
        incident = lifecycle.open_incident(
            session,
            runbook="ecc-storm",
            target="gpu-node-03",
            target_kind="node",
            severity="critical",
            title="ECC error storm on gpu-node-03",
            fired_at=clock.now() - timedelta(minutes=1),
            detected_at=clock.now(),
            actor="bot",
        )
        lifecycle.transition(
            session, incident, to=IncidentState.TRIAGING, at=clock.now(), actor="bot"
        )
        clock.advance(timedelta(seconds=2))
        lifecycle.mark_diagnosed(
            session,
            incident,
            at=clock.now(),
            layer="gpu_hardware",
            confidence=0.92,
            culprits=["gpu-node-03"],
        )
        clock.advance(timedelta(minutes=2))
        lifecycle.add_note(
            session, incident, at=clock.now(), actor="U042", text="cordoning | then RMA"
        )
        clock.advance(timedelta(minutes=10))
        lifecycle.transition(
            session, incident, to=IncidentState.RESOLVED, at=clock.now(), actor="alertmanager"
        )
    with session_scope(engine) as session:
        return read_views(session, incident.id or 0)


def test_markdown_has_the_title_line_summary_figures_and_timeline(
    resolved: tuple[IncidentView, list[EventView]],
) -> None:
    incident, events = resolved
    text = render_postmortem(incident, events, fmt="md")
    assert text.splitlines()[0] == (
        f"# {incident.ref}: ecc-storm on gpu-node-03 (critical, resolved)"
    )
    assert "- Localized to: **gpu_hardware** (confidence 92%)" in text
    assert "- Culprits: gpu-node-03" in text
    assert "| MTTD | 1m | detected_at - fired_at |" in text
    assert "| Time to diagnosis | 2s | diagnosed_at - detected_at |" in text
    assert "| MTTR | 13m 2s | resolved_at - fired_at |" in text
    assert "| 2026-01-01 11:59:00 | alertmanager | alert_fired (pinned) |" in text
    assert "| U042 | note | cordoning \\| then RMA |" in text
    assert f"{incident.ref} resolved after 13m 2s (MTTR)" in text


def test_pinned_only_keeps_the_curated_story(
    resolved: tuple[IncidentView, list[EventView]],
) -> None:
    incident, events = resolved
    text = render_postmortem(incident, events, fmt="md", pinned_only=True)
    assert "## Timeline (pinned events)" in text
    assert "| note |" not in text and "state_changed" not in text
    assert "| verdict (pinned) |" in text


def test_json_follows_the_schema_and_round_trips(
    resolved: tuple[IncidentView, list[EventView]],
) -> None:
    incident, events = resolved
    text = render_postmortem(incident, events, fmt="json")
    data = json.loads(text)
    assert data["schema"] == "gpu-oncall/postmortem/v1"
    assert data["incident"]["id"] == incident.ref
    assert data["incident"]["fired_at"] == "2026-01-01T11:59:00+00:00"
    assert data["figures"] == {
        "mttd": 60.0,
        "mtta": 182.0,
        "time_to_diagnosis": 2.0,
        "mttm": None,
        "mttr": 782.0,
    }
    assert data["formulas"]["mttr"] == "resolved_at - fired_at"
    assert [e["kind"] for e in data["timeline"]] == [e.kind for e in events]
    assert parse_postmortem_json(text) == (incident, events)


def test_corrupt_timestamps_degrade_to_a_message(
    resolved: tuple[IncidentView, list[EventView]],
) -> None:
    incident, events = resolved
    assert incident.resolved_at is not None
    broken = replace(incident, detected_at=incident.resolved_at + timedelta(hours=1))
    assert "figures unavailable: " in render_postmortem(broken, events, fmt="md")
    data = json.loads(render_postmortem(broken, events, fmt="json"))
    assert data["figures"]["mttr"] is None and "is before detected_at" in data["figures_error"]


@pytest.mark.parametrize("fmt", ["pdf", "HTML"])
def test_unsupported_formats_list_the_valid_ones(
    resolved: tuple[IncidentView, list[EventView]], fmt: str
) -> None:
    with pytest.raises(UserInputError, match=r"\(formats: md, json, html\)") as info:
        render_postmortem(*resolved, fmt=fmt)
    assert isinstance(info.value, ValueError)


def test_an_unknown_incident_is_named(engine: Engine) -> None:
    with (
        session_scope(engine) as session,
        pytest.raises(NotFound, match="unknown incident 'INC-9'"),
    ):
        read_postmortem(session, "INC-9")


def test_the_renderer_imports_no_database_library() -> None:
    code = (
        "import sys, bot.incidents.postmortem, bot.incidents.mttr;"
        "bad = [m for m in ('sqlmodel', 'sqlalchemy', 'httpx') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

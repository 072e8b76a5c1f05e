"""The CLI's incident verbs, run as real subprocesses on a temporary database (sim fleet, whose
default scenario has an ECC storm on gpu-node-03 and healthy peers).

Covers: a diagnosis of a healthy node is recorded as a check (resolved, no MTTR, left out of
`mttr`); a CLI-started incident has no invented `alert_fired` event and no `fired_at`, and takes
its severity from the findings; `ack` (first wins, the second says who); `fired` refuses a time
after `detected_at` with one line naming both (exit 2) and, with a valid time, sets fired_at
(source human, on the timeline) and the MTTx follow; `note --pin`; `pin`/`unpin` by event number
(pinned_by recorded), an unknown number exits 2; `resolve --reason`; `incident` shows the event
numbers, the formulas and the GPU-hours; `mttr --json` groups by runbook and layer with p50/p90.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_process import run_cli


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, env={"USER": "alice", "GPU_ONCALL_IDENTITY__CLI_USER": None})


def ok(tmp_path: Path, *args: str) -> str:
    done = cli(tmp_path, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def shown(tmp_path: Path, ref: str = "INC-1") -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(tmp_path, "incident", ref, "--json"))
    return data


@pytest.fixture
def diagnosed(tmp_path: Path) -> Path:
    """INC-1: a person's diagnosis of the faulty node, waiting for approval."""
    ok(tmp_path, "diagnose", "gpu-node-03")
    return tmp_path


def test_a_healthy_node_diagnosis_is_a_check_left_out_of_mttr(tmp_path: Path) -> None:
    ok(tmp_path, "diagnose", "gpu-node-00")
    (listed,) = json.loads(ok(tmp_path, "incidents", "--all", "--json"))
    assert (listed["state"], listed["kind"], listed["layer"]) == ("resolved", "check", "none")
    assert listed["fired_at"] is None
    assert "check (no fault found)" in ok(tmp_path, "incidents", "--all")
    report = json.loads(ok(tmp_path, "mttr", "--since", "1d", "--json"))
    assert report["groups"] == []
    assert "No incidents resolved in the last 1d." in ok(tmp_path, "mttr", "--since", "1d")


def test_a_cli_incident_invents_no_alert_and_takes_severity_from_findings(
    diagnosed: Path,
) -> None:
    data = shown(diagnosed)
    kinds = [e["kind"] for e in data["timeline"]]
    assert "alert_fired" not in kinds
    assert kinds[0] == "incident_opened"
    incident = data["incident"]
    assert (incident["fired_at"], incident["fired_at_source"]) == (None, None)
    assert incident["severity"] == "critical"  # the ECC finding's, not a default
    assert data["figures"]["mttr"] is None


def test_ack_first_wins_and_the_second_is_told_who(diagnosed: Path) -> None:
    assert ok(diagnosed, "ack", "INC-1").strip() == "INC-1 acknowledged by cli:alice"
    again = ok(diagnosed, "ack", "inc-1")
    assert again.startswith("INC-1 was already acknowledged by cli:alice at ")
    assert shown(diagnosed)["incident"]["acknowledged_by"] == "cli:alice"


def test_fired_after_detection_is_refused_then_a_valid_time_updates_the_mttx(
    diagnosed: Path,
) -> None:
    detected = datetime.fromisoformat(shown(diagnosed)["incident"]["detected_at"])
    late = (detected + timedelta(minutes=5)).isoformat()
    refused = cli(diagnosed, "fired", "INC-1", late)
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert "is after detected_at" in line and "impact must begin at or before it" in line
    assert shown(diagnosed)["incident"]["fired_at"] is None  # nothing written

    early = (detected - timedelta(minutes=10)).isoformat()
    out = ok(diagnosed, "fired", "INC-1", early, "DCGM", "shows", "DBEs", "earlier")
    assert "fired_at set to" in out and "MTTD 10m" in out
    data = shown(diagnosed)
    incident = data["incident"]
    assert incident["fired_at_source"] == "human"
    assert incident["fired_at_corrected_by"] == "cli:alice"
    assert data["figures"]["mttd"] == pytest.approx(600.0)
    (event,) = [e for e in data["timeline"] if e["kind"] == "fired_at_corrected"]
    assert event["pinned"] and event["actor"] == "cli:alice"
    assert event["payload"]["reason"] == "DCGM shows DBEs earlier"
    assert event["payload"]["previous"] is None


def test_notes_and_pins_are_on_the_record_with_who(diagnosed: Path) -> None:
    out = ok(diagnosed, "note", "INC-1", "saw", "XID", "48", "in", "dmesg", "--pin")
    assert "added by cli:alice (pinned)" in out
    timeline = shown(diagnosed)["timeline"]
    (note,) = [e for e in timeline if e["kind"] == "note"]
    assert (note["summary"], note["pinned"]) == ("saw XID 48 in dmesg", True)
    step = next(e for e in timeline if e["kind"] == "step_completed" and not e["pinned"])

    ok(diagnosed, "pin", "INC-1", f"#{step['id']}")
    pinned = {e["id"]: e for e in shown(diagnosed)["timeline"]}[step["id"]]
    assert (pinned["pinned"], pinned["pinned_by"]) == (True, "cli:alice")
    ok(diagnosed, "unpin", "INC-1", str(step["id"]))
    assert not {e["id"]: e for e in shown(diagnosed)["timeline"]}[step["id"]]["pinned"]

    missing = cli(diagnosed, "pin", "INC-1", "999999")
    assert missing.returncode == 2
    assert "INC-1 has no timeline event #999999" in missing.stderr
    bad = cli(diagnosed, "pin", "INC-1", "first")
    assert bad.returncode == 2 and "is not a timeline event number" in bad.stderr


def test_resolve_then_incident_and_mttr_show_the_figures(diagnosed: Path) -> None:
    detected = datetime.fromisoformat(shown(diagnosed)["incident"]["detected_at"])
    ok(diagnosed, "fired", "INC-1", (detected - timedelta(minutes=3)).isoformat())
    assert "INC-1 resolved by cli:alice: node replaced" in ok(
        diagnosed, "resolve", "INC-1", "--reason", "node replaced"
    )
    again = cli(diagnosed, "resolve", "INC-1", "--reason", "twice")
    assert again.returncode == 2 and "already resolved" in again.stderr

    text = ok(diagnosed, "incident", "INC-1")
    assert "MTTR" in text and "= resolved_at - fired_at" in text
    assert "GPU-hours lost:" in text and "Σ jobs on the culprit nodes" in text
    assert " *#" in text  # pinned events are marked, with their numbers

    data = shown(diagnosed)
    assert data["incident"]["gpu_hours_lost"] == data["gpu_hours"]["total"]
    by_layer = json.loads(ok(diagnosed, "mttr", "--since", "1d", "--by", "layer", "--json"))
    (group,) = by_layer["groups"]
    assert (group["key"], group["incidents"]) == ("gpu_hardware", 1)
    mttr = group["figures"]["mttr"]
    assert mttr["count"] == 1 and mttr["p50_seconds"] == mttr["p90_seconds"] >= 180
    assert group["gpu_hours"] == data["gpu_hours"]["total"]
    table = ok(diagnosed, "mttr", "--since", "1d")
    assert "node-diagnose" in table and "p50 / p90" in table


def test_a_bad_window_or_grouping_is_one_line_exit_2(tmp_path: Path) -> None:
    window = cli(tmp_path, "mttr", "--since", "7")
    assert window.returncode == 2
    assert "'7' is not a window" in window.stderr
    grouping = cli(tmp_path, "mttr", "--by", "team")
    assert grouping.returncode == 2 and "invalid choice: 'team'" in grouping.stderr


def test_incident_links_its_page_only_when_a_base_url_is_set(diagnosed: Path) -> None:
    assert "page:" not in ok(diagnosed, "incident", "INC-1")
    env = {"USER": "alice", "GPU_ONCALL_PAGES__BASE_URL": "https://oncall.example.net/"}
    done = run_cli(diagnosed, "incident", "INC-1", env=env)
    assert done.returncode == 0, done.stderr
    assert "page: https://oncall.example.net/incidents/INC-1" in done.stdout
    listed = json.loads(run_cli(diagnosed, "incident", "INC-1", "--json", env=env).stdout)
    assert listed["page"] == "https://oncall.example.net/incidents/INC-1"

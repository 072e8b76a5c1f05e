"""People finish the postmortem from the command line, as processes: action items with owner
and due date, and prose sections in their own words that drafts never overwrite.

Covers: `action INC-1 @alice TEXT --due DATE` puts the item, its owner and date in the
Markdown, HTML and JSON postmortem ahead of the drafted items (and a note on the timeline); a
bad date and an unknown section exit 2 naming what is valid; `section INC-1 root_cause TEXT`
replaces the drafted root cause in all three formats, and a later `fired` correction (which
changes the drafts' figures) leaves the written text as written.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.cli.cli_process import run_cli


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, env={"USER": "alice", "GPU_ONCALL_IDENTITY__CLI_USER": None})


def ok(tmp_path: Path, *args: str) -> str:
    done = cli(tmp_path, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def sections(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads(ok(tmp_path, "postmortem", "INC-1", "--format", "json"))["sections"])


def test_action_items_and_written_sections_reach_every_format(tmp_path: Path) -> None:
    ok(tmp_path, "demo", "--yes")
    ok(tmp_path, "action", "INC-1", "@bob", "Add", "a", "DBE", "alert", "--due", "2026-12-01")
    ok(tmp_path, "section", "INC-1", "root_cause", "HBM", "failure", "on", "GPU", "5")

    written = sections(tmp_path)
    first = written["action_items"][0]
    assert first == {"text": "Add a DBE alert", "owner": "@bob", "due": "2026-12-01"} | {
        "draft": False
    }
    assert written["root_cause"] == "HBM failure on GPU 5"
    markdown = ok(tmp_path, "postmortem", "INC-1", "--format", "md")
    assert "| Add a DBE alert | @bob | 2026-12-01 |" in markdown
    assert "HBM failure on GPU 5" in markdown
    page = ok(tmp_path, "postmortem", "INC-1", "--format", "html")
    assert "<td>Add a DBE alert</td><td>@bob</td><td>2026-12-01</td>" in page
    assert "<p>HBM failure on GPU 5</p>" in page
    timeline = json.loads(ok(tmp_path, "postmortem", "INC-1", "--format", "json"))["timeline"]
    noted = "Action item for @bob, due 2026-12-01: Add a DBE alert"
    assert any(e["summary"] == noted for e in timeline)

    detected = json.loads(ok(tmp_path, "incident", "INC-1", "--json"))["incident"]["detected_at"]
    earlier = datetime.fromisoformat(detected) - timedelta(hours=2)  # inside the 30-day window
    ok(tmp_path, "fired", "INC-1", earlier.strftime("%Y-%m-%dT%H:%M:%SZ"), "earlier")
    assert sections(tmp_path)["root_cause"] == "HBM failure on GPU 5", "drafts never overwrite it"


def test_bad_dates_and_sections_exit_2_naming_what_is_valid(tmp_path: Path) -> None:
    ok(tmp_path, "demo", "--yes")
    late = cli(tmp_path, "action", "INC-1", "@bob", "x", "--due", "tomorrow")
    assert late.returncode == 2 and "is not YYYY-MM-DD" in late.stderr
    wrong = cli(tmp_path, "section", "INC-1", "lessons", "x")
    assert wrong.returncode == 2
    assert "unknown postmortem section 'lessons' (sections: summary, impact" in wrong.stderr

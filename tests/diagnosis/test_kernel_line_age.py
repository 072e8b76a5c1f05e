"""Kernel-log lines are judged by their age: an old XID is history, not a current fault
(issue 14, part 4).

Aspects: the wall time of a line in kern.log's RFC 3339 form (with `Z`, `+00:00`, `+0200`),
the traditional syslog form without a year (across New Year), `dmesg -T`; a bare dmesg stamp
has no age and counts as current; splitting at the lookback; the old fault lines reported as
history with their age and the verdict's note; the recovered node (XID 48 two days ago, reset
since) diagnosed as healthy with nothing destructive proposed, while the same XID ten minutes
ago is a GPU fault and a longer configured lookback counts the old lines again; the simulated
device plugin gives the GPU back when the fault is repaired.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import EvidenceSettings, Settings
from bot.diagnosis.line_age import describe_age, line_time, split_by_age
from bot.diagnosis.logs import load_log_catalog
from bot.engine.running import RunOutcome
from bot.engine.steps.log_age import aged_split, history_notes
from bot.evaluation.evaluating import isolated, trigger
from bot.wiring.runtime import open_runtime
from simulator import SCENARIO_DIR
from simulator.scenarios import load_scenario, parse_scenario
from runbooks import LOG_SIGNATURES_FILE

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
XID_48 = (
    "NVRM: Xid (PCI:0000:5d:00): 48, pid=2783858, name=python, Ch 00000008, An uncorrectable "
    "double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, "
    "subpartition 0."
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "2026-11-22T10:01:02.123456+00:00 gpu-node-07 kernel: [1.0] x",
            datetime(2026, 11, 22, 10, 1, 2, 123456, tzinfo=UTC),
        ),
        ("2026-11-22T10:01:02Z node kernel: x", datetime(2026, 11, 22, 10, 1, 2, tzinfo=UTC)),
        ("2026-11-22T12:01:02+0200 node kernel: x", datetime(2026, 11, 22, 10, 1, 2, tzinfo=UTC)),
        ("Nov 22 10:01:02 node kernel: [352811.1] x", datetime(2026, 11, 22, 10, 1, 2, tzinfo=UTC)),
        ("Nov  2 10:01:02 gpu-node-07 kernel: x", datetime(2026, 11, 2, 10, 1, 2, tzinfo=UTC)),
        ("[Sun Nov 22 10:01:02 2026] NVRM: x", datetime(2026, 11, 22, 10, 1, 2, tzinfo=UTC)),
        ("[352811.123456] NVRM: Xid (PCI:0000:5d:00): 48", None),
        ("NVRM: Xid (PCI:0000:5d:00): 48", None),
    ],
)
def test_the_wall_time_a_line_carries(line: str, expected: datetime | None) -> None:
    assert line_time(line, now=NOW) == expected


def test_a_syslog_stamp_without_a_year_is_never_in_the_future() -> None:
    january = datetime(2027, 1, 2, 8, 0, tzinfo=UTC)
    assert line_time("Dec 31 23:59:00 host kernel: x", now=january) == datetime(
        2026, 12, 31, 23, 59, tzinfo=UTC
    )
    assert line_time("Jan  1 00:00:10 host kernel: x", now=january) == datetime(
        2027, 1, 1, 0, 0, 10, tzinfo=UTC
    )


def test_lines_older_than_the_lookback_are_set_apart_and_unknown_ages_stay() -> None:
    text = "\n".join(
        [
            f"2026-11-22T10:00:00+00:00 n kernel: {XID_48}",
            f"[352811.123456] {XID_48}",
            "2026-11-24T11:50:00+00:00 n kernel: mlx5_core 0000:1a:00.0: Link up",
        ]
    )
    aged = split_by_age(text, now=NOW, lookback=timedelta(hours=24))
    assert [at for at, _ in aged.old] == [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    assert aged.current.splitlines() == text.splitlines()[1:]
    assert describe_age(NOW - aged.old[0][0]) == "2 days"
    assert describe_age(timedelta(minutes=1)) == "1 minute"


def test_old_fault_lines_are_history_with_their_age_and_a_note_for_the_verdict() -> None:
    catalog = load_log_catalog(LOG_SIGNATURES_FILE)
    text = f"2026-11-22T10:00:00+00:00 gpu-node-07 kernel: [1159545.302841] {XID_48}"
    recent, summary = aged_split(
        text, now=NOW, window=timedelta(minutes=15), lookback=timedelta(hours=24), catalog=catalog
    )
    assert recent == ""
    assert summary["lookback"] == "24h" and summary["old_lines"] == 1
    (row,) = summary["history"]
    assert (row["xid"], row["layer"], row["age"]) == (48, "gpu_hardware", "2 days")
    step = {"kind": "cluster", "read": "node_logs", "nodes": ["gpu-node-07"], **summary}
    assert history_notes({"kernel": step}) == (
        "gpu-node-07 kernel log: last XID 48 2 days ago (1 old fault line(s), older than the "
        "24h lookback): history, not a current fault",
    )
    longer = aged_split(
        text, now=NOW, window=timedelta(days=3), lookback=timedelta(hours=24), catalog=catalog
    )
    assert longer[0] == text and longer[1]["history"] == []  # a 3-day window reads it


def diagnose(settings: Settings, scenario: Any) -> RunOutcome:
    with open_runtime(isolated(settings), scenario=scenario, fresh=True) as rt:
        triggered = trigger(rt, scenario)
    assert triggered.outcome is not None, triggered.error
    return triggered.outcome


def proposed(outcome: RunOutcome) -> set[str]:
    return {a for s in outcome.steps.values() if s.get("kind") == "propose" for a in s["actions"]}


def xid_scenario(start: str, duration: str | None) -> Any:
    fault = {"kind": "xid", "code": 48, "node": "gpu-node-07", "gpu": 3, "start": start}
    return parse_scenario(
        {
            "apiVersion": "gpu-oncall/v1",
            "kind": "Scenario",
            "metadata": {"name": "xid-age-test", "description": "an XID 48 of some age"},
            "fleet": {"nodes": 16},
            "faults": [fault | ({"duration": duration} if duration else {})],
            "trigger": {"command": "diagnose gpu-node-07"},
        }
    )


def test_a_node_recovered_two_days_ago_is_healthy_and_nothing_destructive_is_proposed(
    settings: Settings,
) -> None:
    scenario = load_scenario(Path(SCENARIO_DIR) / "diagnose-recovered-node-stale-xid.yaml")
    outcome = diagnose(settings, scenario.model_copy(update={"expect": None}))
    verdict = outcome.verdict
    assert (verdict["layer"], verdict["culprits"]) == ("none", [])
    assert proposed(outcome) & {"cordon", "drain", "reboot", "gpu_reset"} == set()
    assert any("last XID 48 2 days ago" in note for note in verdict["detectors"])
    kernel = outcome.steps["kernel"]
    assert kernel["xids"] == [] and kernel["history"][0]["xid"] == 48
    node = outcome.steps["node_state"]
    assert (node["gpu_allocatable"], node["gpu_capacity"]) == (8, 8)  # the plugin is fine


def test_the_same_xid_ten_minutes_ago_is_a_gpu_fault(settings: Settings) -> None:
    outcome = diagnose(settings, xid_scenario("-10m", None))
    assert outcome.verdict["layer"] == "gpu_hardware"
    assert {"cordon", "drain"} <= proposed(outcome)
    assert outcome.steps["kernel"]["xids"] == [48] and outcome.steps["kernel"]["history"] == []
    assert outcome.steps["node_state"]["gpu_allocatable"] == 7  # the plugin holds it meanwhile


def test_a_longer_configured_lookback_counts_the_old_lines_again(settings: Settings) -> None:
    longer = settings.model_copy(
        update={"evidence": EvidenceSettings(kernel_log_lookback_hours=72.0)}
    )
    outcome = diagnose(longer, xid_scenario("-2d", "15m"))
    assert outcome.steps["kernel"]["xids"] == [48]
    assert outcome.steps["kernel"]["lookback"] == "72h"
    assert outcome.verdict["layer"] == "gpu_hardware"

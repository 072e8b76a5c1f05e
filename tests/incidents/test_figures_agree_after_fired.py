"""One computation per figure: after a person moves `fired_at` of a resolved incident, every
place that shows its MTTR and GPU-hours shows the same numbers.

Covers, on the demo's resolved incident, the CLI run as processes: `fired INC-1` earlier;
then `incident --json` (the stored column and the worked figure), `mttr --json`, `/metrics`
(the maintained buckets' sums), `postmortem --format json` and the Markdown postmortem agree on
GPU-hours lost and on MTTR, and the GPU-hours grew (impact started earlier).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.cli.cli_process import cli_output, metrics_exposition


def cli(tmp_path: Path, *args: str) -> str:
    return cli_output(tmp_path, *args, timeout=300)


def metric_sum(exposition: str, name: str) -> float:
    (line,) = [x for x in exposition.splitlines() if x.startswith(f"{name}_sum")]
    return float(line.rsplit(" ", 1)[1])


def test_a_fired_correction_moves_every_figure_alike(tmp_path: Path) -> None:
    cli(tmp_path, "demo", "--yes")
    before = json.loads(cli(tmp_path, "incident", "INC-1", "--json"))
    fired = datetime.fromisoformat(before["incident"]["fired_at"]) - timedelta(minutes=20)
    cli(tmp_path, "fired", "INC-1", fired.isoformat(), "impact", "began", "earlier")

    shown = json.loads(cli(tmp_path, "incident", "INC-1", "--json"))
    lost = shown["gpu_hours"]["total"]
    mttr = shown["figures"]["mttr"]
    assert lost > before["gpu_hours"]["total"], "impact began earlier: more GPU-hours lost"
    assert shown["incident"]["gpu_hours_lost"] == lost
    assert mttr == pytest.approx(before["figures"]["mttr"] + 20 * 60, abs=1)

    (group,) = json.loads(cli(tmp_path, "mttr", "--json"))["groups"]
    assert group["gpu_hours"] == lost
    assert group["figures"]["mttr"]["p50_seconds"] == pytest.approx(mttr)

    exposition = metrics_exposition(tmp_path)
    assert metric_sum(exposition, "gpu_oncall_lost_gpu_seconds") == pytest.approx(lost * 3600)
    assert metric_sum(exposition, "gpu_oncall_mttr_seconds") == pytest.approx(mttr, abs=1e-3)

    post = json.loads(cli(tmp_path, "postmortem", "INC-1", "--format", "json"))
    extra = {figure["label"]: figure["value"] for figure in post["story"]["extra_figures"]}
    assert extra["GPU-hours lost"] == f"{lost:.2f}"
    assert post["incident"]["gpu_hours_lost"] == lost
    assert post["figures"]["mttr"] == pytest.approx(mttr)
    assert f"{lost:.2f}" in cli(tmp_path, "postmortem", "INC-1", "--format", "md")

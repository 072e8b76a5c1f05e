"""Give a fresh Prometheus the simulated fleets' past, so 15-minute windows work at once.

Prometheus only holds what it scraped, and a test cannot wait 15 minutes. So before it starts,
the fleets' series over `[start, end)` are written as OpenMetrics every 30 s and turned into
TSDB blocks with `promtool tsdb create-blocks-from openmetrics` (Prometheus' own backfill).
From then on Prometheus scrapes the live exporters every second.

Backfilled series carry no staleness markers: a series that vanished (a GPU fallen off the
bus, the XID gauge's old `err_code` series) would answer instant queries for the default 5
minutes. The test Prometheus therefore runs with `--query.lookback-delta=40s`, just over the
30 s history step, so a vanished series drops out as it would after its staleness marker.
"""

from __future__ import annotations

import subprocess
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from servers.prometheus import require_binary

from simulator.exporter import format_series, format_value
from simulator.fleet import Fleet

#: The test Prometheus' lookback (`--query.lookback-delta`): just over the history step.
LOOKBACK = "40s"


@dataclass
class History:
    """OpenMetrics lines for a fleet's past."""

    lines: list[str] = field(default_factory=list)


def fleet_history(
    fleet: Fleet,
    *,
    metrics: Collection[str],
    start: datetime,
    end: datetime,
    step: timedelta,
    labels: Mapping[str, str],
) -> History:
    """The fleet's series for `metrics` every `step` in `[start, end)`, labelled as the live
    scrape will label them: `labels` (the target's `job`, `instance` and static labels) are
    added where the exported series lacks them (`honor_labels: true`)."""
    history = History()
    times: list[datetime] = []
    while start + step * len(times) < end:
        times.append(start + step * len(times))
    points = [(at, fleet.offset(at), f"{at.timestamp():.3f}") for at in times]
    for metric in metrics:
        # Tracks are laid out once and read at every time (what fleet.series does per call).
        for track in fleet.tracks(metric):
            fixed = (
                None if track.value_labels else format_series(metric, {**labels, **track.labels})
            )
            for _at, offset, stamp in points:
                value = track.value(offset)
                if value is None:
                    continue
                series = fixed or format_series(metric, {**labels, **track.labels_for(value)})
                history.lines.append(f"{series} {format_value(value)} {stamp}")
    return history


def backfill(histories: Collection[History], *, data_dir: Path, workdir: Path) -> None:
    """Write the histories into TSDB blocks under `data_dir` (before Prometheus starts)."""
    promtool = require_binary("promtool", package="prometheus")
    source = workdir / "history.om"
    lines = sorted(
        (line for h in histories for line in h.lines), key=lambda line: line.rsplit(" ", 2)[0]
    )
    source.write_text("\n".join([*lines, "# EOF"]) + "\n")
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"promtool backfill failed: {done.stderr[-2000:]}"

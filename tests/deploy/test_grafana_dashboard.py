"""The Grafana dashboard in deploy/grafana/ reads metrics `/metrics` really exports, in PromQL
that Prometheus really parses.

Covers: the file is a dashboard (title, uid, panels with targets, the runbook and layer
variables); every `gpu_oncall_*` series named in a panel or a variable is a family of the bot's
exposition (a histogram's `_bucket`/`_sum`/`_count` included), rendered by
`bot.serving.exposition.scrape` on a real database; every expression, with Grafana's variables given
values, passes Debian's
`promtool check rules` as a recording rule (a missing binary fails, never skips); every figure
of docs/mttr.md has a p50 and a p90 panel; GPU-hours are shown as GPU-seconds / 3600.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from servers.prometheus import require_binary

from bot.incidents.mttr import DEFINITIONS
from tests.cli.cli_process import metrics_exposition

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gpu-oncall-mttr.json"
_SERIES = re.compile(r"\bgpu_oncall_[a-z0-9_]+")
_GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__range": "7d",
    '"$runbook"': '".*"',
    '"$layer"': '".*"',
}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def expressions() -> list[str]:
    data = dashboard()
    found = [t["expr"] for p in data["panels"] for t in p["targets"]]
    found += [
        v["query"]["query"] for v in data["templating"]["list"] if v.get("type") == "query"
    ]
    return found


def exported_families(tmp_path: Path) -> set[str]:
    exposition = metrics_exposition(tmp_path)
    return {line.split()[2] for line in exposition.splitlines() if line.startswith("# TYPE ")}


def test_the_file_is_a_dashboard_with_runbook_and_layer_filters() -> None:
    data = dashboard()
    assert data["uid"] == "gpu-oncall-mttr" and data["title"]
    assert all(p["targets"] and p["title"] and p["description"] for p in data["panels"])
    variables = {v["name"] for v in data["templating"]["list"]}
    assert {"datasource", "runbook", "layer"} <= variables


def test_every_series_is_one_the_bot_exports(tmp_path: Path) -> None:
    families = exported_families(tmp_path)
    named = {name for expr in expressions() for name in _SERIES.findall(expr)}
    assert named, "the dashboard reads the bot's metrics"
    for name in sorted(named):
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in families or family in families, f"{name} is not in /metrics"


def test_every_figure_has_its_p50_and_p90_and_gpu_hours_are_converted() -> None:
    exprs = expressions()
    for definition in DEFINITIONS:
        series = f"gpu_oncall_{definition.name}_seconds_bucket"
        for quantile in ("0.5", "0.9"):
            assert any(f"histogram_quantile({quantile}," in e and series in e for e in exprs), (
                definition.name,
                quantile,
            )
    lost = [e for e in exprs if "gpu_oncall_lost_gpu_seconds" in e]
    assert lost and all(e.rstrip().endswith("/ 3600") for e in lost)


def test_every_expression_parses_in_promtool(tmp_path: Path) -> None:
    promtool = require_binary("promtool", package="prometheus")
    rules = []
    for index, expr in enumerate(expressions()):
        for variable, value in _GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        if expr.startswith("label_values("):  # a Grafana function: check its metric instead
            expr = expr.removeprefix("label_values(").split(",")[0]
        assert "$" not in expr, f"an unknown Grafana variable in {expr}"
        rules.append({"record": f"dashboard:expr_{index}", "expr": expr})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [str(promtool), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("panel", dashboard()["panels"], ids=lambda p: str(p["id"]))
def test_panels_use_the_selected_datasource(panel: dict[str, Any]) -> None:
    assert panel["datasource"]["uid"] == "${datasource}"
    assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])

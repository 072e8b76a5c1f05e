"""The simulated fleet's exporter endpoint (simulator.exporter), over real HTTP.

Covers: the text exposition format (HELP/TYPE per metric, label escaping of backslash, quote
and newline, NaN/Inf/integer values) as Prometheus' own parser reads it (`promtool check
metrics`); the real exporters' metric and label names (dcgm-exporter `Hostname`/`gpu`/`UUID`,
node_exporter `device`/`port`/`instance`, kube-state-metrics `node`/`condition`/`status`);
values computed at scrape time (a fault that starts later shows up once the clock passes
it); remediation (a drained node's DBE counter stops climbing; a cordon shows in
`kube_node_spec_unschedulable`); per-family paths and a 404 that lists them; the WSGI entry
point mounted under a prefix.
"""

from __future__ import annotations

import re
import subprocess
from datetime import timedelta
from typing import Any

import httpx
import pytest
from servers.exposition import sample_value
from servers.prometheus import require_binary

from simulator.exporter import (
    CONTENT_TYPE,
    ExporterApp,
    format_sample,
    format_value,
    render_exposition,
    serve_exporter,
)

FAULT = {"kind": "ecc_dbe_storm", "node": "gpu-node-03", "gpu": 5, "start": "-10m"}


def test_values_render_as_the_text_format_writes_them() -> None:
    assert [format_value(v) for v in (4.0, 0.5, float("nan"), float("inf"), -float("inf"))] == [
        "4",
        "0.5",
        "NaN",
        "+Inf",
        "-Inf",
    ]
    assert format_sample("m", {"a": 'x"y\\z\nw'}, 1.0) == 'm{a="x\\"y\\\\z\\nw"} 1'


def test_exposition_parses_with_prometheus_own_parser(make_fleet: Any) -> None:
    promtool = require_binary("promtool", package="prometheus")
    fleet = make_fleet(faults=[FAULT])
    text = (
        render_exposition(fleet) + format_sample("sim_escaping_probe", {"a": 'q"\\\n'}, 1.0) + "\n"
    )
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    # Lint findings (dcgm-exporter's counters lack `_total`, as the real exporter's do) are
    # fine; a format error is not.
    assert "parsing error" not in checked.stdout + checked.stderr


def test_series_carry_the_real_exporters_names_and_labels(make_fleet: Any) -> None:
    fleet = make_fleet(faults=[FAULT])
    with serve_exporter(fleet) as server:
        response = httpx.get(server.url)
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE
    text = response.text
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter" in text
    assert re.search(
        r'DCGM_FI_DEV_GPU_TEMP\{gpu="5",UUID="GPU-[0-9a-f-]+",pci_bus_id="[0-9A-F:.]+",'
        r'device="nvidia5",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-03"',
        text,
    )
    assert 'node_infiniband_state_id{device="mlx5_0",port="1",instance="gpu-node-03"} 4' in text
    assert 'kube_node_status_condition{node="gpu-node-03",condition="Ready",status="true"} 1' in (
        text
    )
    assert 'err_code="48"' in text


def test_a_fault_shows_up_once_the_clock_passes_its_start(make_fleet: Any, clock: Any) -> None:
    later = {"kind": "xid", "code": 79, "node": "gpu-node-02", "gpu": 4, "start": "2m"}
    fleet = make_fleet(faults=[later])
    app = ExporterApp(fleet)
    before = app.handle("/metrics").body.decode()
    clock.advance(minutes=3)
    after = app.handle("/metrics").body.decode()
    selector = {"Hostname": "gpu-node-02", "gpu": "4"}
    assert sample_value(before, "DCGM_FI_DEV_XID_ERRORS", selector) == 0.0
    assert sample_value(after, "DCGM_FI_DEV_XID_ERRORS", selector) == 79.0


def test_a_drained_node_stops_reporting_the_fault(make_fleet: Any, clock: Any) -> None:
    fleet = make_fleet(faults=[FAULT])
    app = ExporterApp(fleet)
    dbe = {"Hostname": "gpu-node-03", "gpu": "5"}
    node = {"node": "gpu-node-03"}
    clock.advance(minutes=1)
    climbing = sample_value(
        app.handle("/metrics").body.decode(), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dbe
    )
    fleet.drain("gpu-node-03", grace=timedelta(seconds=30))
    drained = app.handle("/metrics").body.decode()
    clock.advance(minutes=5)
    later = app.handle("/metrics").body.decode()
    assert climbing > 0
    assert sample_value(later, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dbe) == sample_value(
        drained, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dbe
    )
    assert sample_value(drained, "kube_node_spec_unschedulable", node) == 1.0


def test_each_exporter_family_has_its_own_path(make_fleet: Any) -> None:
    app = ExporterApp(make_fleet())
    dcgm = app.handle("/metrics/dcgm").body.decode()
    infiniband = app.handle("/metrics/node_exporter").body.decode()
    assert "DCGM_FI_DEV_GPU_TEMP" in dcgm and "node_infiniband_" not in dcgm
    assert "node_infiniband_state_id" in infiniband and "DCGM_" not in infiniband
    missing = app.handle("/metrics/nope")
    assert missing.status == 404
    assert "/metrics/dcgm" in missing.body.decode()


def test_wsgi_app_mounts_under_a_prefix(make_fleet: Any) -> None:
    app = ExporterApp(make_fleet(), prefix="/sim")
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen.append((status, headers))

    mounted = b"".join(app({"SCRIPT_NAME": "/sim", "PATH_INFO": "/metrics"}, start_response))
    full = app.handle("/sim/metrics/kube_state_metrics")
    assert seen[0][0] == "200 OK"
    assert ("Content-Type", CONTENT_TYPE) in seen[0][1]
    assert b"# TYPE kube_node_status_condition gauge" in mounted
    assert full.status == 200 and b"DCGM_" not in full.body


@pytest.mark.parametrize("path", ["/", "/metricsx", "/metrics/dcgm/extra"])
def test_unknown_paths_are_404(make_fleet: Any, path: str) -> None:
    assert ExporterApp(make_fleet()).handle(path).status == 404

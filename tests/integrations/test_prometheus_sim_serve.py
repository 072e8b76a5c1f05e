"""`gpu-oncall sim serve` as a real process, scraped by Debian's prometheus, and the bot's own
CLI diagnosing through that Prometheus (`GPU_ONCALL_TELEMETRY=prometheus`): the try-it-out
path of docs/operations.md.

Covers: `sim serve --port 0` prints where it serves and answers /metrics and /metrics/<family>
in the text format; Ctrl-C stops it with status 0; a bad scenario exits 2 naming the field; a
busy port exits 2; Prometheus scrapes it (the row-remap failure flag reads 1 on the faulty
GPU); `gpu-oncall run node-diagnose node=... window=30s --json` with telemetry from that
Prometheus localizes the row-remap failure to gpu_hardware, with the flag's value as evidence.
Prometheus holds only what it scraped here, so the run uses a 30 s window.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servers.prometheus import PrometheusServer, ScrapeTarget

from simulator import SCENARIO_DIR

SCENARIO = SCENARIO_DIR / "row-remap-failure.yaml"


def cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = dict(os.environ) | {"GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'o.db'}"}
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", *args],
        cwd=tmp_path,
        env=full | (env or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A `sim serve` process on a free port; yields its /metrics URL."""
    process = cli(tmp_path, "sim", "serve", "--scenario", str(SCENARIO), "--port", "0")
    assert process.stdout is not None
    url = ""
    for line in process.stdout:  # bounded: the process prints these lines at start-up
        if line.startswith("Serving "):
            url = line.split()[1]
            break
    assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.stderr else ""
    try:
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
        assert process.returncode == 0
        assert "Stopped." in out


def test_sim_serve_answers_every_exporter_path(served: str) -> None:
    everything = httpx.get(served, timeout=10)
    dcgm = httpx.get(served + "/dcgm", timeout=10)
    assert everything.status_code == dcgm.status_code == 200
    assert everything.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'DCGM_FI_DEV_ROW_REMAP_FAILURE{gpu="1"' in everything.text
    assert "kube_node_status_condition{" in everything.text
    assert "node_infiniband_" not in dcgm.text


def test_sim_serve_refuses_a_bad_scenario_and_a_busy_port(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: gpu-oncall/v1\nkind: Scenario\nmetadata: {name: x}\nfleet: {}\n")
    refused = cli(tmp_path, "sim", "serve", "--scenario", str(bad), "--port", "0")
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 2
    assert "fleet" in err and "Traceback" not in err
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = str(busy.getsockname()[1])
        taken = cli(tmp_path, "sim", "serve", "--scenario", str(SCENARIO), "--port", port)
        _, err = taken.communicate(timeout=60)
    assert taken.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in err


def test_the_cli_diagnoses_through_prometheus_scraping_sim_serve(
    served: str, tmp_path: Path
) -> None:
    target = ScrapeTarget("sim", served)
    with PrometheusServer(tmp_path / "prometheus", targets=[target]).started() as prometheus:
        prometheus.wait_for_scrapes(2)
        flag = prometheus.query('DCGM_FI_DEV_ROW_REMAP_FAILURE{Hostname="gpu-node-09",gpu="1"}')
        assert [row["value"][1] for row in flag] == ["1"]
        env = {
            "GPU_ONCALL_TELEMETRY": "prometheus",
            "GPU_ONCALL_PROMETHEUS__URL": prometheus.url,
            "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
        }
        run = cli(
            tmp_path,
            *("run", "node-diagnose", "node=gpu-node-09", "window=30s"),
            *("--scenario", str(SCENARIO), "--json"),
            env=env,
        )
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    outcome = json.loads(out)
    assert outcome["verdict"]["layer"] == "gpu_hardware"
    assert outcome["verdict"]["culprits"] == ["gpu-node-09"]
    assert outcome["steps"]["remap_failed"]["status"] == "fired"
    assert outcome["steps"]["remap_failure"]["max"] == 1.0

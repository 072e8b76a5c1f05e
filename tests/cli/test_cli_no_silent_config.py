"""No silent configuration: what the bot was told, it either uses or refuses, and `serve` says
what it runs with and what it does.

Covers, as real processes: a misspelled `GPU_ONCALL_*` variable (in the environment or in
`.env`) is a one-line start-up error naming the closest valid one (exit 2); a runbook directory
that does not exist is one too; `serve` with the JSON log format logs its effective settings with
every secret masked (a token, a password in a URL), then at INFO the incident an alert opens and
the run it starts, each line a JSON object carrying the incident id. The masking and the JSON
formatter are also checked directly.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from pydantic import SecretStr
from servers.oncall import alert, webhook

from bot.cli.log_format import MASK, JsonFormatter, effective_settings
from bot.config import PrometheusSettings, ServerSettings, Settings, StorageSettings
from tests.cli.cli_process import run_cli

WAIT = 120.0
SECRET = "s3cret-webhook-token"
PASSWORD = "pw-never-logged"


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    return line


def test_a_misspelled_variable_names_the_closest_setting(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "incidents", env={"GPU_ONCALL_POLICY__APROVERS": '["cli:bob"]'})
    line = one_error_line(done)
    assert "GPU_ONCALL_POLICY__APROVERS (environment) is not a setting" in line
    assert "did you mean GPU_ONCALL_POLICY__APPROVERS?" in line


def test_a_misspelled_line_in_dotenv_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GPU_ONCALL_TELEMETRI=prometheus\n", encoding="utf-8")
    line = one_error_line(run_cli(tmp_path, "incidents"))
    assert "GPU_ONCALL_TELEMETRI (.env) is not a setting" in line
    assert "did you mean GPU_ONCALL_TELEMETRY?" in line


def test_a_missing_runbook_directory_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-runbooks"
    dirs = json.dumps([str(missing)])
    done = run_cli(tmp_path, "incidents", env={"GPU_ONCALL_RUNBOOK_DIRS": dirs})
    line = one_error_line(done)
    assert "GPU_ONCALL_RUNBOOK_DIRS" in line and f"'{missing}' does not exist" in line


def test_effective_settings_mask_every_secret() -> None:
    settings = Settings(
        storage=StorageSettings(url=f"postgresql+psycopg://oncall:{PASSWORD}@db.example/oncall"),
        server=ServerSettings(token=SecretStr(SECRET)),
        prometheus=PrometheusSettings(url=f"https://bot:{PASSWORD}@prom.example"),
    )
    shown = effective_settings(settings)
    text = json.dumps(shown)
    assert SECRET not in text and PASSWORD not in text
    assert shown["server"]["token"] == MASK
    assert shown["storage"]["url"] == "postgresql+psycopg://oncall:***@db.example/oncall"
    assert shown["slack"]["bot_token"] is None, "an unset secret reads as unset"


def test_json_log_lines_carry_the_context() -> None:
    record = logging.LogRecord("bot.x", logging.INFO, __file__, 1, "INC-%s opened", (7,), None)
    record.incident_id = 7
    line = json.loads(JsonFormatter().format(record))
    assert (line["level"], line["message"], line["incident_id"]) == ("INFO", "INC-7 opened", 7)
    assert datetime.fromisoformat(line["at"]).utcoffset() == timedelta(0)


def test_serve_logs_its_settings_masked_and_each_incident_and_run_as_json(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.update(
        {
            "GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'oncall.db'}",
            "GPU_ONCALL_LOG__FORMAT": "json",
            "GPU_ONCALL_SERVER__TOKEN": SECRET,
            "GPU_ONCALL_PROMETHEUS__URL": f"http://bot:{PASSWORD}@127.0.0.1:9",
            "PYTHONUNBUFFERED": "1",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", "serve", "--demo",
         "--port", "0", "--host", "127.0.0.1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    try:
        url = _serving_url(proc, lines)
        reader.start()
        starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        body = webhook([alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)])
        answer = httpx.post(
            f"{url}/alerts", json=body, headers={"Authorization": f"Bearer {SECRET}"}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        _wait_for(lines, "run ", "INC-1")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=WAIT)
        if reader.ident is not None:
            reader.join(WAIT)
        if proc.stdout is not None:
            proc.stdout.close()
    output = "".join(lines)
    assert SECRET not in output and PASSWORD not in output
    logged = [json.loads(x) for x in lines if x.startswith("{")]
    (settings_line,) = [x for x in logged if x["message"].startswith("effective settings")]
    assert settings_line["level"] == "INFO"
    assert '"token": "(set, hidden)"' in settings_line["message"]
    opened = [x for x in logged if re.match(r"INC-1 opened by alertmanager", x["message"])]
    assert opened and opened[0]["incident_id"] == 1
    run_started = re.compile(r"run \w{8} of ecc-storm on INC-1 started")
    started = [x for x in logged if run_started.match(x["message"])]
    assert started and started[0]["run_id"]


def _serving_url(proc: subprocess.Popen[str], lines: list[str]) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        found = re.search(r"serving on (http://[0-9.]+:[0-9]+)", line)
        if found:
            return found.group(1)
    raise AssertionError(f"serve exited with {proc.wait()}: {''.join(lines)}")


def _wait_for(lines: list[str], *words: str) -> None:
    """Poll the collected output (bounded) until a line holds every word."""
    deadline = datetime.now(UTC) + timedelta(seconds=WAIT)
    while datetime.now(UTC) < deadline:
        if any(all(w in line for w in words) for line in list(lines)):
            return
        threading.Event().wait(0.1)
    raise AssertionError(f"no log line with {words}: {''.join(lines)[-2000:]}")

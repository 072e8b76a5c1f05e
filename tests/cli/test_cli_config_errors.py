"""Configuration mistakes and oversized input are one line on standard error with exit code 2,
never a traceback (`gpu-oncall` as a real subprocess).

Covers: an invalid choice (`GPU_ONCALL_TELEMETRY=k8s`) names the variable, the value and the
valid choices; a list setting that is not JSON (`GPU_ONCALL_RUNBOOK_DIRS`) and a mapping inside a
settings group (`GPU_ONCALL_SLACK__CHANNELS_BY_RUNBOOK`) name the variable and show the JSON
form; a PostgreSQL URL whose driver is not installed names `GPU_ONCALL_STORAGE__URL`, the
package and the valid URL forms, with the password hidden; an unparsable URL; a node range
beyond the cap names the input and the cap and opens no incident; an oversized KEY=VALUE input
and an out-of-range `--limit` are refused.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.cli_process import run_cli


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, env=env)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("gpu-oncall")
    return line


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "GPU_ONCALL_TELEMETRY",
            "k8s",
            ["GPU_ONCALL_TELEMETRY='k8s'", "'sim' or 'prometheus'"],
        ),
        (
            "GPU_ONCALL_RUNBOOK_DIRS",
            "/etc/gpu-oncall/runbooks",
            ["GPU_ONCALL_RUNBOOK_DIRS is not valid JSON", '["/etc/gpu-oncall/runbooks"]'],
        ),
        (
            "GPU_ONCALL_SLACK__CHANNELS_BY_RUNBOOK",
            "ecc-storm=C123",
            ["GPU_ONCALL_SLACK__CHANNELS_BY_RUNBOOK", "not valid JSON", '{"key": "value"}'],
        ),
        (
            "GPU_ONCALL_STORAGE__URL",
            "postgresql+psycopg2://bob:hunter2@db.example/oncall",
            ["GPU_ONCALL_STORAGE__URL", "psycopg2-binary", "postgresql+psycopg://"],
        ),
        ("GPU_ONCALL_STORAGE__URL", "::not a url::", ["GPU_ONCALL_STORAGE__URL", "sqlite:///"]),
    ],
)
def test_configuration_mistake_is_one_line_naming_the_variable(
    tmp_path: Path, variable: str, value: str, expected: list[str]
) -> None:
    line = one_line_error(cli(tmp_path, "incidents", **{variable: value}))
    for text in expected:
        assert text in line
    assert "hunter2" not in line


def test_node_range_beyond_the_cap_is_refused_before_expanding(tmp_path: Path) -> None:
    line = one_line_error(cli(tmp_path, "run", "node-storm", "nodes=gpu-node-[0-99999]"))
    assert "input 'nodes'" in line
    assert "100000 nodes" in line and "at most 4096" in line
    assert cli(tmp_path, "incidents").stdout.strip() == "No open incidents."


def test_oversized_input_and_limit_are_refused(tmp_path: Path) -> None:
    line = one_line_error(cli(tmp_path, "run", "node-storm", "nodes=" + "a" * 5000))
    assert "at most 4096" in line
    refused = cli(tmp_path, "alerts", "--limit", "0")
    assert refused.returncode == 2
    assert "--limit: 0 is not between 1 and 10000" in refused.stderr

"""The HTML postmortem from the command line, in real processes.

Covers: `gpu-oncall demo --yes` ends by printing the path of the HTML postmortem it wrote, and
that file holds both charts and the GPU-hours lost with their terms; `postmortem --format html`
prints the page, `-o PATH` writes it and prints the path and, with `pages.base_url` set, the
live page's URL; an unwritable output path is one line on stderr and exit 2; `--format pdf` is
refused by the parser with the choices.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.cli_process import run_cli

BASE_URL = "https://oncall.example.com"


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(folder, *args, env={"GPU_ONCALL_PAGES__BASE_URL": BASE_URL, "USER": "alice"})


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("demo")
    done = cli(folder, "demo", "--yes")
    assert done.returncode == 0, done.stderr
    return folder, done.stdout


def test_the_demo_ends_with_the_path_of_the_html_postmortem(demo: tuple[Path, str]) -> None:
    folder, out = demo
    last = out.rstrip().splitlines()[-1]
    expected = (folder / "INC-1-postmortem.html").resolve()
    assert last == f"  HTML postmortem written to {expected}"
    assert f"live page: {BASE_URL}/incidents/INC-1" in out
    page = expected.read_text()
    assert 'id="timeline-chart"' in page and 'id="metric-chart"' in page
    assert 'data-marker="resolved"' in page
    # the GPU-hours lost, with each term's formula, among the figures
    for figure in ("GPU-hours lost", "GPU-hours: out of service", "GPU-hours: idle job GPUs"):
        assert f'data-figure="{figure}"' in page


def test_postmortem_html_to_stdout_and_to_a_file(demo: tuple[Path, str], tmp_path: Path) -> None:
    folder, _ = demo
    printed = cli(folder, "postmortem", "INC-1", "--format", "html")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith("<!DOCTYPE html>")
    assert f'<a href="{BASE_URL}/incidents/INC-1">' in printed.stdout
    target = tmp_path / "INC-1.html"
    written = cli(folder, "postmortem", "INC-1", "--format", "html", "--pinned", "-o", str(target))
    assert written.returncode == 0, written.stderr
    assert written.stdout.splitlines() == [
        f"INC-1 postmortem (html) written to {target}",
        f"live page: {BASE_URL}/incidents/INC-1",
    ]
    assert "Timeline events (pinned)" in target.read_text()


def test_bad_output_or_format_is_one_line_and_exit_2(demo: tuple[Path, str]) -> None:
    folder, _ = demo
    missing = folder / "no-such-dir" / "x.html"
    done = cli(folder, "postmortem", "INC-1", "--format", "html", "-o", str(missing))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        f"cannot write the postmortem to {missing}: No such file or directory"
    )
    assert "Traceback" not in done.stderr
    refused = cli(folder, "postmortem", "INC-1", "--format", "pdf")
    assert refused.returncode == 2 and "'md', 'json', 'html'" in refused.stderr

"""`gpu-oncall triage-bundle PATH` and the bundle reader behind it; `classify-log` on tool output.

Covers: a directory of tool outputs gives one verdict with file:line evidence (exit 0, text and
--json); a .tar.gz holding an `nvidia-bug-report.log.gz` (built here from fixture text) names the
culprit GPU by node, index, PCI bus id and UUID; the reader never extracts, skips `..`, absolute
and link members and says so, truncates a member (and a gzip bomb) at the member limit, stops at
the total and member-count limits, skips binary files; a missing path or a corrupt archive is
one line and exit 2; `classify-log` recognises an `ibstat` output it knew nothing about before.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from bot.intake.bundles import read_bundle
from bot.errors import UserInputError

FIXTURES = Path(__file__).parents[1] / "diagnosis" / "fixtures" / "evidence"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args], capture_output=True, text=True, timeout=60
    )


def add(archive: tarfile.TarFile, name: str, data: bytes, **kind: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in kind.items():
        setattr(info, key, value)
    archive.addfile(info, io.BytesIO(data))


@pytest.fixture
def bug_report_tgz(tmp_path: Path) -> Path:
    report = gzip.compress((FIXTURES / "nvidia-bug-report.log").read_bytes())
    path = tmp_path / "node-17-bundle.tgz"
    with tarfile.open(path, "w:gz") as archive:
        add(archive, "bundle/nvidia-bug-report.log.gz", report)
        add(archive, "bundle/ibstat.txt", (FIXTURES / "ibstat-healthy.txt").read_bytes())
    return path


def test_directory_gives_one_verdict_with_file_and_line(tmp_path: Path) -> None:
    for name in ("ibstat-port-down.txt", "nvlink-e-healthy.txt", "vllm-healthy.log"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    done = cli("triage-bundle", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "verdict:  fabric" in done.stdout
    assert "culprits: HCA mlx5_5 port 1" in done.stdout
    assert "ibstat-port-down.txt:94  State: Down" in done.stdout


def test_tarball_with_a_gzipped_bug_report_names_the_culprit_gpu(bug_report_tgz: Path) -> None:
    done = cli("triage-bundle", str(bug_report_tgz), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["layer"] == "gpu_hardware"
    assert result["culprits"] == [
        "gpu-node-17 / GPU 1 / 0000:2a:00.0 / GPU-91a7e3c4-7be0-4c6e-a1d9-2f0c8e55b6d2"
    ]
    assert result["files"] == ["bundle/nvidia-bug-report.log", "bundle/ibstat.txt"]
    cited = {line["source"] for f in result["deciding"] for line in f["lines"]}
    assert cited == {"bundle/nvidia-bug-report.log"}
    assert {f["format"] for f in result["formats"]} >= {"nvidia-smi -q", "kernel log", "ibstat"}


def test_unsafe_members_are_skipped_and_nothing_is_extracted(tmp_path: Path) -> None:
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as archive:
        add(archive, "../escape.txt", b"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off.\n")
        add(archive, "/etc/abs.txt", b"x\n")
        add(archive, "link", b"", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add(archive, "ok/dmesg.txt", (FIXTURES / "dmesg-gsp-timeout.txt").read_bytes())
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    bundle = read_bundle(path)
    assert [name for name, _ in bundle.texts] == ["ok/dmesg.txt"]
    assert bundle.notes == [
        "../escape.txt: skipped (not a regular file, or unsafe name)",
        "/etc/abs.txt: skipped (not a regular file, or unsafe name)",
        "link: skipped (not a regular file, or unsafe name)",
    ]
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar"]


def test_a_symlink_in_a_directory_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\n")
    bundle_dir = tmp_path / "bundle"
    bundle_dir.mkdir()
    (bundle_dir / "link.txt").symlink_to(secret)
    (bundle_dir / "ibstat.txt").write_text((FIXTURES / "ibstat-healthy.txt").read_text())
    bundle = read_bundle(bundle_dir)
    assert [name for name, _ in bundle.texts] == ["ibstat.txt"]
    assert bundle.notes == ["link.txt: skipped (not a regular file, or unsafe name)"]


def test_a_huge_member_and_a_gzip_bomb_are_cut_at_the_member_limit(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_bytes(b"x" * 5000)
    (tmp_path / "bomb.log.gz").write_bytes(gzip.compress(b"y" * 10_000_000))
    bundle = read_bundle(tmp_path, max_member_bytes=1000)
    assert {name: len(text) for name, text in bundle.texts} == {"big.log": 1000, "bomb.log": 1000}
    assert bundle.notes == [
        "big.log: truncated to its first 1000 bytes (MAX_MEMBER_BYTES)",
        "bomb.log: truncated to its first 1000 bytes (MAX_MEMBER_BYTES)",
    ]


def test_total_and_member_count_limits_stop_reading(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"{i}.log").write_text("z" * 400)
    by_total = read_bundle(tmp_path, max_total_bytes=1000)
    assert [len(t) for _, t in by_total.texts] == [400, 400, 200]
    assert by_total.notes[-1] == "stopped at 1000 bytes read (MAX_TOTAL_BYTES)"
    by_count = read_bundle(tmp_path, max_members=2)
    assert len(by_count.texts) == 2
    assert by_count.notes == ["stopped after 2 members (MAX_MEMBERS)"]


def test_binary_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\x00\x01" * 10)
    assert read_bundle(tmp_path).notes == ["core.bin: skipped (binary)"]


def test_a_corrupt_tarball_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "broken.tgz"
    path.write_bytes(b"this is not a tarball")
    with pytest.raises(UserInputError, match="cannot read bundle"):
        read_bundle(path)
    done = cli("triage-bundle", str(path))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith(f"gpu-oncall: error: cannot read bundle '{path}'")


def test_a_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = cli("triage-bundle", str(tmp_path / "nope"), "--json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == (
        f"gpu-oncall: error: cannot read bundle '{tmp_path / 'nope'}': no such file or directory"
    )


def test_classify_log_recognises_a_tool_output() -> None:
    done = cli("classify-log", str(FIXTURES / "ibstat-port-down.txt"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["layer"], result["signal"], result["matches"]) == ("fabric", "ib.port_down", [])
    assert result["evidence"]["culprits"] == ["HCA mlx5_5 port 1"]


def test_a_member_that_is_not_gzip_is_skipped_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "nvidia-bug-report.log.gz").write_bytes(b"plain text, not gzip\n")
    (tmp_path / "dmesg.txt").write_text((FIXTURES / "dmesg-gsp-timeout.txt").read_text())
    bundle = read_bundle(tmp_path)
    assert [name for name, _ in bundle.texts] == ["dmesg.txt"]
    assert bundle.notes == ["nvidia-bug-report.log.gz: skipped (not valid gzip data)"]

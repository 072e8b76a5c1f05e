"""`gpu-oncall classify-log`: layer, deciding signature and matched lines for any text.

Covers: a kernel XID 79 line from a file (gpu_hardware), NCCL transport retry errors from
stdin (fabric), text with no signature (`{"layer": null, ...}`, exit 0), an unreadable file
(exit 2, one line).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def classify(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "classify-log", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_xid_79_from_a_file_is_gpu_hardware(tmp_path: Path) -> None:
    log = tmp_path / "dmesg.txt"
    log.write_text("boot ok\nNVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.\n")
    result = json.loads(classify(str(log), "--json").stdout)
    assert result["layer"] == "gpu_hardware"
    assert result["xids"] == [79]
    assert result["matches"][0]["line_no"] == 2


def test_nccl_retry_exceeded_from_stdin_is_fabric() -> None:
    line = (
        "NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    done = classify("-", stdin=line)
    assert done.returncode == 0
    assert "layer:  fabric" in done.stdout


def test_nothing_known_gives_a_null_layer_and_says_nothing_was_recognised() -> None:
    done = classify("-", "--json", stdin="all good\n")
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "layer": None,
        "signal": None,
        "status": "unrecognised",
        "formats_recognised": [],
        "not_understood": [{"source": "stdin", "line_no": 1, "text": "all good"}],
        "xids": [],
        "matches": [],
    }


def test_a_healthy_output_is_recognised_not_unknown() -> None:
    table = (
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "|   0  NVIDIA A100-SXM...  On   | 00000000:03:00.0 Off |                    0 |\n"
        "| N/A   28C    P0    52W / 400W |      0MiB / 40960MiB |      0%      Default |\n"
    )
    done = classify("-", "--json", stdin="Remapped Rows\n    Pending : No\n" + table)
    found = json.loads(done.stdout)
    assert (found["layer"], found["status"]) == (None, "healthy")
    assert found["formats_recognised"] == ["nvidia-smi", "nvidia-smi -q"]  # the table, the section


def test_unreadable_file_exits_2_with_one_line(tmp_path: Path) -> None:
    done = classify(str(tmp_path / "missing.log"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "cannot read log" in done.stderr

"""`gpu-oncall serve` as a real process, stopped with SIGTERM while a webhook is in flight.

Covers: the server prints the URL it listens on (`--port 0` picks a free one); a webhook whose
headers have arrived (the server answered `100 Continue`, so the request is being handled) but
whose body is still on its way when SIGTERM lands is still answered 200 and stored; new
connections are refused once the server stops accepting; the process exits 0. A port already
in use is one line naming it and the settings, exit code 2.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from servers.oncall import TOKEN, alert, webhook

WAIT = 60.0


@pytest.fixture
def serving(tmp_path: Path, scenario_dir: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    env = dict(os.environ) | {
        "GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'oncall.db'}",
        "GPU_ONCALL_SERVER__TOKEN": TOKEN,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", "serve", "--demo", "--port", "0",
         "--scenario", str(scenario_dir / "ecc-dbe-storm.yaml")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    url = ""
    for line in process.stdout:  # bounded: printed at start-up (or the process ends)
        if line.startswith("gpu-oncall serving on "):
            url = line.split()[3].rstrip(":")
            break
    try:
        assert url.startswith("http://127.0.0.1:"), process.stderr.read() if process.stderr else ""
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=WAIT)


def _webhook_body() -> bytes:
    starts = datetime.now(UTC) - timedelta(minutes=10)
    return json.dumps(
        webhook([alert("GPUEccStorm", {"Hostname": "gpu-node-03"}, starts_at=starts)])
    ).encode()


def test_sigterm_lets_the_in_flight_webhook_finish_and_exits_0(
    serving: tuple[subprocess.Popen[str], str],
) -> None:
    process, url = serving
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = _webhook_body()
    with socket.create_connection((host, int(port)), timeout=WAIT) as sock:
        sock.sendall(
            b"POST /alerts HTTP/1.1\r\nHost: bot\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n".encode()
            + b"Expect: 100-continue\r\n\r\n"
        )
        interim = sock.recv(4096)  # sent when the handler starts reading the body
        assert interim.startswith(b"HTTP/1.1 100 Continue"), interim
        process.send_signal(signal.SIGTERM)
        sock.sendall(body)
        answer = b""
        while chunk := sock.recv(65536):  # the server closes the connection after answering
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 200"), answer
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["incidents"] == ["INC-1"]
    out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err
    assert "stopping" in out
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection((host, int(port)), timeout=WAIT).close()


def test_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ) | {"GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'o.db'}"}
        done = subprocess.run(
            [sys.executable, "-m", "bot.cli.main", "serve", "--demo", "--port", str(port)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=WAIT, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    logged = [x for x in done.stderr.strip().splitlines() if not x.startswith("INFO ")]
    assert logged == [
        f"gpu-oncall: error: cannot listen on 127.0.0.1:{port}: Address already in use; choose "
        "another --host/--port (GPU_ONCALL_SERVER__HOST / GPU_ONCALL_SERVER__PORT)"
    ]

"""`gpu-oncall serve` replicas as real subprocesses on 127.0.0.1, for the multi-replica tests.

`start_serve(url)` runs `python -m bot.cli.main serve` on a free port with
`GPU_ONCALL_STORAGE__URL=url` (plus `env`), its stdout and stderr going to a log file, and
returns once `/readyz` answers 200. The handle's `kill()` is SIGKILL (no handler, no finally
block runs: the crash the HA tests need), `terminate()` is SIGTERM (a graceful stop); `log` is
everything the process wrote so far. Every handle started in a test is stopped by `stop_all`,
which also deletes the temporary directory `start_serve` made for one given no `workdir`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.servers.prometheus import free_port, poll

WAIT_SECONDS = 90.0
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ServeReplica:
    """One running `gpu-oncall serve`; `url` is its base URL (http://127.0.0.1:<port>)."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path
    workdir: Path
    temporary: bool = False  # `workdir` was made by start_serve: stop_all deletes it

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, then reap."""
        if self.alive():
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=WAIT_SECONDS)

    def terminate(self) -> int:
        """SIGTERM (the graceful stop); returns the exit status, SIGKILL after WAIT_SECONDS."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def wait_for_log(self, needle: str, *, seconds: float = WAIT_SECONDS) -> None:
        """Wait (bounded) until `needle` appears in the log; fail with the log's tail if not."""
        poll(lambda: needle in self.log, what=f"{needle!r} in the log of serve {self.url}",
             seconds=seconds)  # fmt: skip


def start_serve(
    url: str,
    *,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
    workdir: Path | None = None,
    args: tuple[str, ...] = (),
    ready: Callable[[ServeReplica], bool] | None = None,
) -> ServeReplica:
    """Start `gpu-oncall serve` on `url`'s database and wait until `/readyz` answers 200 (or
    `ready(replica)` holds, when given). `port` None picks a free one; `workdir` (the process's
    cwd, where its log file goes) defaults to a new temporary directory."""
    port = port if port is not None else free_port()
    temporary = workdir is None
    workdir = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="gpu-oncall-serve-"))
    workdir.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(
        {
            "GPU_ONCALL_STORAGE__URL": url,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO_ROOT), full_env.get("PYTHONPATH", "")) if p
            ),
        }
    )
    full_env.update(env or {})
    for port_setting in ("GPU_ONCALL_CLUSTER", "GPU_ONCALL_TELEMETRY"):  # serve needs them named
        full_env.setdefault(port_setting, "sim")
    log_path = workdir / f"serve-{port}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), *args],
            cwd=workdir,
            env=full_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    replica = ServeReplica(process, f"http://127.0.0.1:{port}", log_path, workdir, temporary)
    _started.append(replica)
    check = ready or _answers_ready

    def up() -> bool:
        if not replica.alive():
            tail = replica.log[-3000:]
            pytest.fail(
                f"serve exited with {process.returncode} before ready:\n{tail}", pytrace=False
            )
        return check(replica)

    poll(up, what=f"serve on {replica.url} to answer /readyz 200", seconds=WAIT_SECONDS)
    return replica


def _answers_ready(replica: ServeReplica) -> bool:
    try:
        return httpx.get(f"{replica.url}/readyz", timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


_started: list[ServeReplica] = []


def stop_all() -> None:
    """SIGKILL every replica `start_serve` started and is still running, and delete the
    temporary directories it made (test teardown)."""
    while _started:
        replica = _started.pop()
        if replica.alive():
            replica.kill()
        if replica.temporary:
            shutil.rmtree(replica.workdir, ignore_errors=True)


@pytest.fixture
def serve_replicas() -> Iterator[Callable[..., ServeReplica]]:
    """Teardown for tests that call `start_serve`: kills what they left running."""
    yield start_serve
    stop_all()

"""A real Prometheus (Debian's `prometheus` package) on 127.0.0.1 for the real-server tests.

`PrometheusServer` writes a config into a temporary directory (scrape_interval 1s, one job per
scrape target, `honor_labels: true` so the simulated exporters' `instance`/`node` labels stay
as exported), starts the binary on an ephemeral port with its own `--storage.tsdb.path`, waits
for `/-/ready`, and can wait (bounded polling) until every target has been scraped. A missing
binary fails the test with the apt package to install; it is never skipped.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

#: Bounded polling: at most this long for readiness or the first scrapes, checking every 50 ms.
WAIT_SECONDS = 30.0
POLL_SECONDS = 0.05


def require_binary(name: str, *, package: str) -> str:
    """The absolute path of `name`, or fail (never skip) naming the Debian package."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"'{name}' not found on PATH: install Debian's package "
            f"(apt-get install {package}); .ci/run does this in CI",
            pytrace=False,
        )
    return path


LISTEN_PORTS_FROM = 20_000
"""The lowest port `free_port` picks; it picks below the kernel's ephemeral range."""
_PICKS = random.SystemRandom()  # not the `random` module's state, which Hypothesis seeds


def free_port() -> int:
    """A port nothing listens on right now (bound and released on 127.0.0.1), below the
    kernel's ephemeral range: a port from that range can be taken, between the pick and the
    server's bind, by any outgoing connection (CI: an slurmd's to slurmctld took slurmrestd's).
    Each pytest-xdist worker picks from its own slice of that span (`port_span`), so two
    workers never pick the same port (CI #36: a server of the other worker bound the
    kube-apiserver's between its pick and its bind). The kernel's own pick when the span is
    too small to leave room."""
    low, high = port_span()
    for _ in range(200 if high - low >= 500 else 0):
        port = _PICKS.randrange(low, high)
        if port_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_span() -> tuple[int, int]:
    """The ports `[low, high)` this process picks from: from LISTEN_PORTS_FROM to the kernel's
    ephemeral range, and of that the slice of this pytest-xdist worker (`gwN` of
    `PYTEST_XDIST_WORKER_COUNT`), the whole span outside xdist."""
    low, high = LISTEN_PORTS_FROM, _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit()):
        return low, high
    workers = max(int(count), 1)
    index = int(worker[2:]) % workers
    share = (high - low) // workers
    return low + index * share, low + (index + 1) * share


def port_free(port: int) -> bool:
    """Whether `port` can be bound on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


T = TypeVar("T")
BIND_TRIES = 3
"""Starts of a server, each on a newly picked port, while its port is taken between the pick
and its bind (`free_port` picks below the ephemeral range, so no outgoing connection can take
it first; another listener still may: CI's kube-apiserver once lost its port so)."""


class PortTaken(Exception):
    """A server exited because another process had bound its port first; says what it said."""


def port_taken(process: subprocess.Popen[bytes] | None, log_file: Path) -> bool:
    """Whether `process` exited saying its address was in use (Go's "address already in use",
    Slurm's "Address already in use")."""
    if process is None or process.poll() is None:
        return False
    return "address already in use" in log_file.read_text(errors="replace").lower()


def on_free_port(start: Callable[[int], T], *, what: str) -> T:
    """`start(port)` on a newly picked port, picked again while it raises PortTaken (having
    stopped its process); the last of BIND_TRIES fails the test with what the server said."""
    for attempt in range(1, BIND_TRIES + 1):
        try:
            return start(free_port())
        except PortTaken as exc:
            if attempt == BIND_TRIES:
                pytest.fail(f"{what}: its port was taken {BIND_TRIES} times: {exc}", pytrace=False)
    raise AssertionError("unreachable: the last try returns or fails")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 when unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def poll(
    check: Callable[[], bool],
    *,
    what: str,
    seconds: float = WAIT_SECONDS,
    detail: Callable[[], str] | None = None,
) -> None:
    """Call `check` every 50 ms until it is true; fail naming `what` after `seconds` (and
    what `detail` says of the state it was left in)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            said = f": {detail()}" if detail is not None else ""
            pytest.fail(f"timed out after {seconds:.0f}s waiting for {what}{said}", pytrace=False)
        time.sleep(POLL_SECONDS)


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """Terminate a server process, killing it if it has not exited after 10 s."""
    if process is None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def answers_ready(
    process: subprocess.Popen[bytes] | None, http: httpx.Client, *, name: str, log_file: Path
) -> bool:
    """Whether the server answers `/-/ready`; fails the test with its log if it has exited."""
    if process is not None and process.poll() is not None:
        pytest.fail(
            f"{name} exited with {process.returncode}: {log_file.read_text()[-2000:]}",
            pytrace=False,
        )
    try:
        return http.get("/-/ready").status_code == 200
    except httpx.TransportError:
        return False


@dataclass(frozen=True)
class ScrapeTarget:
    """One scrape job: a full metrics URL and target labels added to every series."""

    job: str
    url: str
    labels: dict[str, str] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        parts = urlsplit(self.url)
        return {
            "job_name": self.job,
            "honor_labels": True,
            "metrics_path": parts.path or "/metrics",
            "static_configs": [{"targets": [parts.netloc], "labels": dict(self.labels)}],
        }


class PrometheusServer:
    """Debian's prometheus on 127.0.0.1:<ephemeral>, data and config under `workdir`."""

    def __init__(
        self,
        workdir: Path,
        *,
        targets: Sequence[ScrapeTarget] = (),
        scrape_interval: str = "1s",
        data_dir: Path | None = None,
        lookback: str | None = None,
    ) -> None:
        self.binary = require_binary("prometheus", package="prometheus")
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.targets = list(targets)
        self.data_dir = data_dir or workdir / "data"
        self.lookback = lookback
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_file = workdir / "prometheus.yml"
        self.log_file = workdir / "prometheus.log"
        self.config_file.write_text(
            yaml.safe_dump(
                {
                    "global": {
                        "scrape_interval": scrape_interval,
                        "scrape_timeout": scrape_interval,
                        "evaluation_interval": scrape_interval,
                    },
                    "scrape_configs": [t.config() for t in self.targets],
                }
            )
        )
        self._process: subprocess.Popen[bytes] | None = None
        self._http = httpx.Client(base_url=self.url, timeout=5.0)

    def start(self) -> PrometheusServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.config_file}",
                    f"--storage.tsdb.path={self.data_dir}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1d",
                    "--log.level=warn",
                    *([f"--query.lookback-delta={self.lookback}"] if self.lookback else []),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        poll(self._ready, what=f"prometheus /-/ready on {self.url} (log: {self.log_file})")
        return self

    @contextmanager
    def started(self) -> Iterator[PrometheusServer]:
        """Started for the duration of the block, then stopped."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def stop(self) -> None:
        process, self._process = self._process, None
        self._http.close()
        stop_process(process)

    def query(self, promql: str, **params: str) -> list[dict[str, Any]]:
        """An instant query's result rows (fails the test on an error answer)."""
        response = self._http.get("/api/v1/query", params={"query": promql, **params})
        body = response.json()
        assert body.get("status") == "success", body
        return list(body["data"]["result"])

    def wait_for_scrapes(self, count: int = 2) -> None:
        """Until every job's target has been scraped `count` times (Prometheus' own
        `scrape_samples_scraped`, which no exporter can shadow)."""
        jobs = sorted({t.job for t in self.targets})

        def scraped() -> bool:
            rows = self.query(f"count_over_time(scrape_samples_scraped[5m]) >= {count}")
            return sorted({r["metric"].get("job", "") for r in rows}) == jobs

        poll(scraped, what=f"{count} scrapes of {', '.join(jobs)} by {self.url}")

    def _ready(self) -> bool:
        return answers_ready(self._process, self._http, name="prometheus", log_file=self.log_file)

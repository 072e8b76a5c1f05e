"""The Slurm fixture's slurmrestd survives a port taken while the cluster came up
(tests/servers/slurm.py).

Covers: a test server's port is picked below the kernel's ephemeral range, where no outgoing
connection can take it (an slurmd's connection to slurmctld once took slurmrestd's in CI), from
a slice of that span of its own per pytest-xdist worker (so two workers never pick one port); the
port picked for slurmrestd is bound by another listener when it starts: it is started again on
another port, answers there, and the cluster's REST URL says so (`on_free_port`, which the
kube-apiserver's start shares: a server whose port stays taken fails the test with what it said).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import prometheus as prometheus_module
from tests.servers.prometheus import (
    BIND_TRIES,
    LISTEN_PORTS_FROM,
    PortTaken,
    free_port,
    on_free_port,
    port_free,
    port_span,
    stop_process,
)
from tests.servers.slurm import REST_VERSIONS, SlurmServers


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert all(LISTEN_PORTS_FROM <= p < low and port_free(p) for p in ports)


def test_each_xdist_worker_picks_ports_from_its_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    picked = {}
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        picked[worker] = (port_span(), [free_port() for _ in range(50)])
    (first_low, first_high), first = picked["gw0"]
    (second_low, second_high), second = picked["gw1"]
    assert LISTEN_PORTS_FROM == first_low < first_high <= second_low < second_high <= low
    assert all(first_low <= p < first_high for p in first)
    assert all(second_low <= p < second_high for p in second)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert port_span() == (LISTEN_PORTS_FROM, low)  # outside xdist: the whole span


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_slurmrestd_starts_on_another_port_when_its_port_was_taken(
    slurm: SlurmServers, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([taken_port])
    monkeypatch.setattr(prometheus_module, "free_port", lambda: next(picks, None) or free_port())
    stop_process(slurm.slurmrestd)
    slurm._start_slurmrestd()
    assert slurm.rest_port != taken_port
    assert slurm.rest_url == f"http://127.0.0.1:{slurm.rest_port}"
    headers = {"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": slurm.token()}
    ping = httpx.get(f"{slurm.rest_url}/slurm/{REST_VERSIONS[0]}/ping", headers=headers)
    assert ping.is_success


def test_a_port_taken_at_every_try_fails_with_what_the_server_said() -> None:
    ports: list[int] = []

    def start(port: int) -> None:
        ports.append(port)
        raise PortTaken(f"listen tcp 127.0.0.1:{port}: bind: address already in use")

    with pytest.raises(pytest.fail.Exception) as failed:
        on_free_port(start, what="kube-apiserver")
    assert len(ports) == BIND_TRIES
    assert str(failed.value).startswith(f"kube-apiserver: its port was taken {BIND_TRIES} times")
    assert f"127.0.0.1:{ports[-1]}: bind: address already in use" in str(failed.value)

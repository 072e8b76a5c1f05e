"""Reads of one node take turns: two REST reads of the same node that overlap crash a 22.05.8
slurmctld ("double free or corruption" as its answering thread exits; docs/slurm.md), and the
bot reads a node from several threads at once (a stage's steps, the evidence snapshot, a
remediation's checks).

On the session's real cluster: eight threads, each with its own adapter, read one node 300 times
each and the controller is still up (without the turns it died within seconds). By failure
injection: a second read of a node waits for the first to end, while reads of two different
nodes still overlap.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx

from integrations.slurm import Scontrol, SlurmCluster, SlurmRest
from tests.servers.slurm import SlurmServers, make_slurm_cluster

NODE = "gpu-node-03"
READERS, READS = 8, 300
WAIT = 10.0  # seconds a thread waits for another before the test gives up on it


def _run_all(work: list[Callable[[], object]]) -> list[BaseException]:
    """Run each in its own thread; the exceptions they raised."""
    failed: list[BaseException] = []

    def run(one: Callable[[], object]) -> None:
        try:
            one()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(one,)) for one in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
    return failed


def test_many_threads_reading_one_node_leave_the_controller_up(slurm: SlurmServers) -> None:
    clusters = [make_slurm_cluster(slurm) for _ in range(READERS)]

    def reads(cluster: SlurmCluster) -> Callable[[], None]:
        def read() -> None:
            for _ in range(READS):
                (info,) = cluster.nodes([NODE])
                assert info.name == NODE

        return read

    try:
        failed = _run_all([reads(cluster) for cluster in clusters])
    finally:
        for cluster in clusters:
            cluster.close()
    controller = slurm.slurmctld
    assert controller is not None and controller.poll() is None, (
        f"slurmctld exited with {controller and controller.returncode}: "
        f"{slurm._output('slurmctld', 600)}"
    )
    assert "is UP" in slurm.run("scontrol", "ping", check=False)
    assert failed == []


def _mock_cluster(handler: Callable[[httpx.Request], httpx.Response]) -> SlurmCluster:
    http = httpx.Client(base_url="http://slurmrestd.test", transport=httpx.MockTransport(handler))
    return SlurmCluster(SlurmRest(http, user="root", token="t0k", retries=0), Scontrol())


SPEC: dict[str, Any] = {"paths": {"/slurm/v0.0.38/node/{node_name}": {"get": {}}}}


def _node(name: str) -> httpx.Response:
    return httpx.Response(200, json={"nodes": [{"name": name, "state": ["IDLE"]}]})


def test_a_second_read_of_a_node_waits_for_the_first() -> None:
    inside = threading.Event()
    release = threading.Event()
    in_flight, most = [0], [0]
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/openapi/v3":
            return httpx.Response(200, json=SPEC)
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        inside.set()
        release.wait(WAIT)
        with lock:
            in_flight[0] -= 1
        return _node(NODE)

    cluster = _mock_cluster(handler)
    cluster.rest.detect()
    first = threading.Thread(target=cluster.nodes, args=([NODE],))
    first.start()
    assert inside.wait(WAIT)
    second = threading.Thread(target=cluster.nodes, args=([NODE],))
    second.start()
    second.join(0.2)  # room for it to enter the handler, were it not held back
    assert most[0] == 1 and second.is_alive()
    release.set()
    first.join(WAIT)
    second.join(WAIT)
    assert not first.is_alive() and not second.is_alive() and most[0] == 1


def test_reads_of_two_different_nodes_still_overlap() -> None:
    both_inside = threading.Barrier(2, timeout=WAIT)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/openapi/v3":
            return httpx.Response(200, json=SPEC)
        both_inside.wait()  # broken (an error) unless the other node's read is in flight too
        return _node(request.url.path.rsplit("/", 1)[1])

    cluster = _mock_cluster(handler)
    cluster.rest.detect()
    assert _run_all([lambda: cluster.nodes([NODE]), lambda: cluster.nodes(["gpu-node-05"])]) == []

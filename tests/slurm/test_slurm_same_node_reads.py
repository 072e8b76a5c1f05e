"""Reads of one node take turns (integrations/slurm/turns.py): two REST reads of the same node
that overlap crash a 22.05.8 slurmctld ("double free or corruption" as its answering thread
exits; docs/slurm.md), and the bot reads a node from several threads at once (a stage's steps,
the evidence snapshot, a remediation's checks) and from several processes (replicas, a CLI
`approve` while `serve` runs).

On the session's real cluster: eight threads, each with its own adapter, read one node 300 times
each, and two bot processes sharing a turns file (`slurm.turns_file`, through the settings) read
it from four threads each; the controller is still up (without the turns it died within
seconds). By failure injection: a second read of a node waits for the first to end, while reads
of two different nodes still overlap; another process holding a node's turn in the file holds
this one's read of that node back, not of another node; an unopenable turns file is refused at
start naming the setting.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.config import Settings, SlurmSettings
from bot.errors import UserInputError
from bot.wiring.slurm import make_slurm_cluster as wire_slurm_cluster
from integrations.slurm import Scontrol, SlurmCluster, SlurmRest
from integrations.slurm.turns import NodeTurns
from tests.servers.slurm import SlurmServers, make_slurm_cluster
from tests.slurm.test_slurm_ecc_storm_journey import slurm_env

NODE = "gpu-node-03"
READERS, READS = 8, 300
WAIT = 10.0  # seconds a thread waits for another before the test gives up on it
URL = "http://slurmrestd.test"


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
        thread.join()  # each read is bounded by its client's timeout
    return failed


def _controller_up(slurm: SlurmServers) -> None:
    lost = slurm.controller_lost()
    assert not lost, f"slurmctld {lost}: {slurm._output('slurmctld', 600)}"


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
    _controller_up(slurm)
    assert failed == []


READER = textwrap.dedent(
    """
    import sys, threading
    from bot.config import Settings
    from bot.wiring.slurm import make_slurm_cluster
    cluster = make_slurm_cluster(Settings())
    done = []
    def read():
        for _ in range(int(sys.argv[2])):
            (info,) = cluster.nodes([sys.argv[1]])
            done.append(info.name)
    threads = [threading.Thread(target=read) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(len(done), set(done))
    """
)


def test_two_processes_sharing_a_turns_file_leave_the_controller_up(
    slurm: SlurmServers, tmp_path: Path
) -> None:
    env = os.environ | slurm_env(slurm) | {"GPU_ONCALL_SLURM__TURNS_FILE": str(tmp_path / "t")}
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, NODE, str(READS)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    said = [reader.communicate() for reader in readers]  # reads are bounded by timeouts
    _controller_up(slurm)
    assert [out for out, _ in said] == [f"{4 * READS} {{'{NODE}'}}\n"] * 2, said
    assert [reader.returncode for reader in readers] == [0, 0]


def _mock_cluster(handler: Callable[[httpx.Request], httpx.Response]) -> SlurmCluster:
    http = httpx.Client(base_url=URL, transport=httpx.MockTransport(handler))
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


HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from integrations.slurm.turns import NodeTurns
    with NodeTurns(sys.argv[1], path=Path(sys.argv[2])).reading(sys.argv[3]):
        print("held", flush=True)
        sys.stdin.readline()
    """
)


def test_another_process_holding_a_nodes_turn_holds_this_ones_read_back(tmp_path: Path) -> None:
    turns = NodeTurns(URL, path=tmp_path / "turns")
    other = "gpu-node-05"
    assert turns.slot(NODE) != turns.slot(other)
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, URL, str(turns.path), NODE],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as holder:  # fmt: skip
        try:
            _held_back_until_released(turns, holder, other)
        finally:
            holder.kill()


def _held_back_until_released(turns: NodeTurns, holder: subprocess.Popen[str], other: str) -> None:
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    entered = {node: threading.Event() for node in (NODE, other)}

    def read(node: str) -> None:
        with turns.reading(node):
            entered[node].set()

    threading.Thread(target=read, args=(other,)).start()
    assert entered[other].wait(WAIT)  # another node's turn is free
    waiting = threading.Thread(target=read, args=(NODE,))
    waiting.start()
    assert not entered[NODE].wait(0.2)  # room to enter, were it not held back
    assert holder.stdin is not None
    holder.stdin.write("done\n")
    holder.stdin.flush()
    assert entered[NODE].wait(WAIT)
    waiting.join(WAIT)


def test_an_unopenable_turns_file_is_refused_at_start_naming_the_setting(tmp_path: Path) -> None:
    settings = Settings(
        cluster="slurm",
        slurm=SlurmSettings(token="t0k", turns_file=tmp_path / "missing-dir" / "turns"),
    )
    said = r"cannot open slurm.turns_file .*missing-dir/turns: No such file or directory: "
    with pytest.raises(UserInputError, match=said + "GPU_ONCALL_SLURM__TURNS_FILE must name"):
        wire_slurm_cluster(settings)

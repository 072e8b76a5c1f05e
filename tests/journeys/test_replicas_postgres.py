"""Two `gpu-oncall serve` replicas on one PostgreSQL, as real processes on 127.0.0.1: every
webhook delivered to both, and one replica SIGKILLed in the middle of a triage and of an action.

The replicas are started by `tests.servers.replicas.start_serve` on one database of the
session's Debian PostgreSQL, with short leases (`GPU_ONCALL_WORK__*`) and their own worker ids,
so the database says which replica holds which work.

- The storm: a simulated fleet of 4,096 nodes in racks of 128, every node firing GPUEccStorm
  with its `rack` label; one webhook per rack (Alertmanager grouping by alertname and rack),
  each delivered to both replicas, in shuffled order, from concurrent senders. Every rack
  passes the storm threshold (8) inside one webhook, so intake opens one storm incident per rack
  and the node-storm runbook runs once per rack; four racks hold a node with double-bit ECC
  errors, which the storm run cordons and drains (every risk auto-approved, so actions run in
  the replicas). Both replicas load the same scenario file. On PostgreSQL the simulated fleet
  keeps no state file (bot/wiring/simulation.py writes one only beside a SQLite database), so each
  replica's simulated cluster writes stay in that process: this test asserts on the database
  (SQL counts and group-by checks), and the crash tests below use one cluster both replicas act
  on, the fake Kubernetes API, whose recorded requests count the actions.
- The crashes: cluster = the fake Kubernetes API (tests/servers/fake_kube.py) seeded from
  ecc-dbe-storm, telemetry simulated from the same scenario, tickets POSTed to a local ticket
  desk. A request the replica must make is held by the fake (`FakeKube.stall`): the node-log
  query of the triage's gather, or the cordon's `spec.unschedulable` PATCH. When it arrives the
  replica holding the work (its worker id on the work row) is SIGKILLed, the held request is
  let through (the write lands after its client died), and the other replica must take the
  work over once the lease expires and finish it: one run, completed; cordon, drain and ticket
  succeeded once each; one applied cordon PATCH, each pod evicted at most once, one ticket key.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from journeys.test_crash_serve import TicketDesk, ticket_desk
from sqlalchemy import text

from simulator import Fleet, load_scenario
from simulator.scenarios import SCENARIO_DIR
from storage.db import make_engine
from tests.servers.fake_kube import FakeKube, Stall, start_fake_kube
from tests.servers.fleet_storm import (
    Census,
    census,
    node_name,
    rack_webhooks,
    storm_scenario,
)
from tests.servers.oncall import alert, webhook
from tests.servers.prometheus import poll
from tests.servers.replicas import ServeReplica, start_serve, stop_all

TOKEN = "replicas-webhook-token"
WAIT = 240.0
"""Upper bound for a state to be reached; the tests go on as soon as it is."""
NODES, PER_RACK = 4096, 128
FAULTY = (5, 1300, 2700, 4000)
"""Node indexes with DBE errors, each in a different rack."""
AUTO_APPROVE = json.dumps(["low", "medium", "high"])
NODE = "gpu-node-03"
"""ecc-dbe-storm's node with the fault."""
FINISHED = {"completed", "failed", "rejected"}
REDELIVERIES = 3
"""Times a sender sends a webhook again after its connection was reset."""


def replica_env(worker: str, **extra: str) -> dict[str, str]:
    return {
        "GPU_ONCALL_SERVER__TOKEN": TOKEN,
        "GPU_ONCALL_STORAGE__MIGRATE": "true",
        "GPU_ONCALL_WORK__LEASE_SECONDS": "2",
        "GPU_ONCALL_WORK__HEARTBEAT_SECONDS": "0.3",
        "GPU_ONCALL_WORK__TAKEOVER_SECONDS": "0.5",
        "GPU_ONCALL_WORK__WORKER_ID": worker,
        "GPU_ONCALL_POLICY__AUTO_APPROVE_RISKS": AUTO_APPROVE,
        "USER": "alice",
        **extra,
    }


@pytest.fixture
def replicas() -> Iterator[None]:
    try:
        yield
    finally:
        stop_all()


def deliver(replicas: list[ServeReplica], bodies: list[dict[str, Any]]) -> Counter[int]:
    """Each body to every replica, in shuffled order, from four concurrent senders; the HTTP
    status codes received."""
    deliveries = [(body, replica.url) for body in bodies for replica in replicas]
    random.Random(11).shuffle(deliveries)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(timeout=120.0, headers=headers) as http:

        def send(item: tuple[dict[str, Any], str]) -> int:
            # A keep-alive connection the replica closed as idle (while the senders were busy
            # with the other replica) can reset the request sent on it: Alertmanager sends the
            # webhook again, and so does this sender. Redelivery is what the test is about.
            for attempt in range(REDELIVERIES + 1):
                try:
                    return http.post(f"{item[1]}/alerts", json=item[0]).status_code
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    if attempt == REDELIVERIES:
                        raise
            raise AssertionError("unreachable")

        with ThreadPoolExecutor(4) as pool:
            return Counter(pool.map(send, deliveries))


def settled(url: str) -> Census | None:
    """The census once no work is pending and every run finished; None before."""
    found = census(url)
    done = sum(n for status, n in found.run_statuses.items() if status in FINISHED)
    return found if found.runs and found.open_work == 0 and done == found.runs else None


def test_every_webhook_to_both_replicas_stores_and_triages_each_alert_once(
    postgres_url: str, tmp_path: Path, replicas: None
) -> None:
    scenario = storm_scenario(tmp_path / "storm.yaml", nodes=NODES, per_rack=PER_RACK,
                              faulty=FAULTY)  # fmt: skip
    env = {"GPU_ONCALL_SIM__SCENARIO": str(scenario)}
    workers = ("replica-a", "replica-b")
    pair = [start_serve(postgres_url, env=replica_env(w, **env)) for w in workers]
    starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    bodies = rack_webhooks(nodes=NODES, per_rack=PER_RACK, starts=starts)

    codes = deliver(pair, bodies)

    assert codes == Counter({200: 2 * len(bodies)})
    poll(lambda: settled(postgres_url) is not None, what="every storm run to finish",
         seconds=WAIT)  # fmt: skip
    found = census(postgres_url)
    racks = NODES // PER_RACK
    assert (found.alerts, found.duplicate_alerts, found.unattached_alerts) == (NODES, 0, 0)
    assert (found.incidents, found.duplicate_incidents) == (racks, 0)
    assert found.incident_kinds == {"storm": racks}  # no per-node incident beside the storms
    assert (found.runs, found.duplicate_runs) == (racks, 0)
    assert found.run_statuses == {"completed": racks}
    assert found.duplicate_actions == 0
    faulty = [node_name(i, NODES) for i in FAULTY]
    node_actions = Counter((a, t) for a, t, _s in found.actions if a in ("cordon", "drain"))
    assert node_actions == Counter({(a, n): 1 for n in faulty for a in ("cordon", "drain")})
    assert {s for _a, _t, s in found.actions} == {"succeeded"}
    assert all(r.alive() for r in pair)


# --- one replica killed in the middle of the work -------------------------------------------


@dataclass
class KubePair:
    """Two replicas on one database and one fake Kubernetes API; tickets to `desk`."""

    url: str
    kube: FakeKube
    desk: TicketDesk
    replicas: dict[str, ServeReplica]
    evictions: set[str]

    def post_alert(self) -> None:
        """The alert to both replicas (Alertmanager's redelivery after a timeout)."""
        starts = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
        body = webhook([alert("GPUEccStorm", {"Hostname": NODE}, starts_at=starts)])
        for replica in self.replicas.values():
            answer = httpx.post(f"{replica.url}/alerts", json=body, timeout=60.0,
                                headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
            assert answer.status_code == 200, answer.text

    def sql(self, query: str) -> list[Any]:
        engine = make_engine(self.url)
        try:
            with engine.connect() as db:
                return list(db.execute(text(query)).all())
        finally:
            engine.dispose()

    def holder(self) -> str:
        """The worker id on the triage work row (the replica running it)."""
        rows = self.sql("SELECT owner FROM work_items WHERE kind = 'triage'")
        assert len(rows) == 1 and rows[0][0] in self.replicas, rows
        return str(rows[0][0])

    def kill_holder_at(self, held: Stall) -> str:
        """SIGKILL the replica whose request `held` is, then let the request through; the
        survivor's worker id."""
        poll(held.arrived.is_set, what=f"{held.method} {held.path_contains} to reach the API",
             seconds=WAIT)  # fmt: skip
        dead = self.holder()
        self.replicas[dead].kill()
        held.release()  # applied: the write lands after its client died
        (survivor,) = (w for w in self.replicas if w != dead)
        return survivor


@contextmanager
def kube_pair(postgres_url: str, tmp_path: Path) -> Iterator[KubePair]:
    scenario = SCENARIO_DIR / "ecc-dbe-storm.yaml"
    fleet = Fleet.from_scenario(load_scenario(scenario), now=lambda: datetime.now(UTC))
    with start_fake_kube() as kube, ticket_desk() as (desk, tickets):
        desk.hold = False
        kube.seed_from_fleet(fleet)
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        env = {
            "GPU_ONCALL_CLUSTER": "kubernetes",
            "GPU_ONCALL_TELEMETRY": "sim",
            "GPU_ONCALL_SIM__SCENARIO": str(scenario),
            "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(kubeconfig),
            "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
            "GPU_ONCALL_TICKETS__WEBHOOK_URL": tickets,
        }
        pods = {
            f"/api/v1/namespaces/{ns}/pods/{name}/eviction"
            for (ns, name), pod in kube.pods.items()
            if pod["spec"].get("nodeName") == NODE
            and not any(o.get("kind") == "DaemonSet"
                        for o in pod["metadata"].get("ownerReferences") or [])
        }  # fmt: skip
        try:
            yield KubePair(
                postgres_url,
                kube,
                desk,
                {w: start_serve(postgres_url, env=replica_env(w, **env))
                 for w in ("replica-a", "replica-b")},  # fmt: skip
                pods,
            )
        finally:
            kube.release_stalls()
            stop_all()


def finished_by(pair: KubePair, survivor: str) -> None:
    """The run completes on the survivor with each action once, on the database and the API."""
    poll(lambda: pair.sql("SELECT status FROM runbook_runs") == [("completed",)],
         what="the run to complete on the surviving replica", seconds=WAIT)  # fmt: skip
    actions = sorted(pair.sql("SELECT action, target, status FROM actions"))
    assert actions == [
        ("cordon", NODE, "succeeded"),
        ("drain", NODE, "succeeded"),
        ("open_ticket", NODE, "succeeded"),
    ]
    assert pair.sql("SELECT COUNT(*) FROM incidents") == [(1,)]
    assert pair.sql("SELECT owner, attempts FROM work_items WHERE kind = 'triage'") == [
        (survivor, 2)
    ]
    notes = [s for (s,) in pair.sql("SELECT summary FROM timeline_events WHERE kind = 'note'")]
    assert any("taken over" in n and survivor in n for n in notes), notes
    cordons = [
        r for r in pair.kube.sent("PATCH", path=f"/api/v1/nodes/{NODE}")
        if "unschedulable" in json.dumps(r.body) and r.status == 200
    ]  # fmt: skip
    assert len(cordons) == 1
    evicted = Counter(r.path for r in pair.kube.sent("POST") if r.path.endswith("/eviction")
                      and r.status == 201)  # fmt: skip
    assert set(evicted) == pair.evictions and set(evicted.values()) == {1}
    assert not pair.kube.sent("DELETE")
    assert len(set(pair.desk.keys)) == 1
    assert pair.kube.node(NODE)["spec"].get("unschedulable") is True


def test_replica_killed_in_the_middle_of_a_triage_is_taken_over_by_the_other(
    postgres_url: str, tmp_path: Path, replicas: None
) -> None:
    with kube_pair(postgres_url, tmp_path) as pair:
        held = pair.kube.stall("GET", f"/api/v1/nodes/{NODE}/proxy/logs/")
        pair.post_alert()

        survivor = pair.kill_holder_at(held)

        assert not pair.sql("SELECT id FROM actions")  # killed before any action began
        finished_by(pair, survivor)


def test_replica_killed_in_the_middle_of_a_cordon_is_finished_by_the_other_once(
    postgres_url: str, tmp_path: Path, replicas: None
) -> None:
    with kube_pair(postgres_url, tmp_path) as pair:
        held = pair.kube.stall(
            "PATCH", f"/api/v1/nodes/{NODE}", where=lambda body: "unschedulable" in json.dumps(body)
        )
        pair.post_alert()

        survivor = pair.kill_holder_at(held)

        assert pair.sql("SELECT action, status FROM actions") == [("cordon", "running")]
        finished_by(pair, survivor)

"""A paused medik8s NodeHealthCheck stops the bot's node actions (coexistence with NHC).

Covers: `pause_refusal` is None without pauses and otherwise names the node, each NHC and its
pause requests; through the action registry, on the simulated fleet and over HTTP against the
fake API server, `cordon`, `drain` and `taint` of a node a paused NHC selects are `refused`
with that reason on the result and write nothing (no PATCH, no eviction reaches the API; the
fleet counts no cordon); an NHC that is not paused, or paused but selecting other nodes, lets
the cordon go ahead; `uncordon` does not read NHCs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.actions.coexistence import pause_refusal
from bot.actions.registry import ActionContext, default_registry
from bot.clock import FakeClock
from integrations.cluster import Cluster, NodeInfo, RemediationPause
from simulator import Fleet, SimCluster
from simulator.marking import SimHealthCheck
from integrations.tickets import RecordedTickets
from tests.servers.fake_kube import FakeKube, start_fake_kube
from tests.servers.kube_world import contract_fleet, make_kubernetes, role_permissions

NODE = "gpu-node-01"
RACK_00 = {"matchLabels": {"gpu-oncall.io/rack": "rack-00"}}
REASON = (
    "gpu-node-01 is under a paused remediator: "
    "NodeHealthCheck nhc-rack-00 is paused (upgrade-window, CHG-1234)"
)
NHC_PATH = "/apis/remediation.medik8s.io/v1alpha1/nodehealthchecks"


def test_no_pauses_is_no_refusal_and_each_pause_is_named() -> None:
    node = NodeInfo(name="gpu-node-03", ready=True, unschedulable=False)
    assert pause_refusal(node, []) is None
    pauses = [
        RemediationPause("NodeHealthCheck", "nhc-a", ("upgrade",)),
        RemediationPause("NodeHealthCheck", "nhc-b", ("freeze", "CHG-9")),
    ]
    assert pause_refusal(node, pauses) == (
        "gpu-node-03 is under a paused remediator: NodeHealthCheck nhc-a is paused (upgrade); "
        "NodeHealthCheck nhc-b is paused (freeze, CHG-9)"
    )


@dataclass
class Setup:
    fleet: Fleet
    cluster: Cluster
    fake: FakeKube | None

    def add_health_check(self, name: str, selector: dict[str, Any], pauses: list[str]) -> None:
        if self.fake is not None:
            self.fake.add_health_check(name, selector=selector, pause_requests=pauses)
        else:
            self.fleet.set_health_check(SimHealthCheck(name, selector, tuple(pauses)))

    def writes(self) -> list[str]:
        """Write requests the API received (in the sim: the fleet's journaled node writes)."""
        if self.fake is None:
            journal = self.fleet.export_state()["journal"]
            return [f"{e['verb']} {e['node']}" for e in journal if e["verb"] != "health_check"]
        return [f"{r.method} {r.path}" for r in self.fake.requests if r.method != "GET"]


@pytest.fixture(params=["sim", "kubernetes"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    fleet = contract_fleet()
    if request.param == "sim":
        yield Setup(fleet, SimCluster(fleet), None)
        return
    with start_fake_kube() as fake:
        fake.seed_from_fleet(fleet)
        fake.grant_only(role_permissions())
        cluster = make_kubernetes(fake, tmp_path)
        yield Setup(fleet, cluster, fake)
        cluster.close()


def act(setup: Setup, action: str, target: str = NODE) -> Any:
    context = ActionContext(
        cluster=setup.cluster,
        clock=FakeClock(),
        tickets=RecordedTickets(),
        run_id="run-1",
        incident="INC-7",
        idempotency_key=f"{action}-1",
        verdict={"summary": "ECC storm on GPU 5"},
    )
    return default_registry().get(action).run(context, target, {})


@pytest.mark.parametrize("action", ["cordon", "drain", "taint"])
def test_a_paused_health_check_refuses_the_action_with_its_reason(
    setup: Setup, action: str
) -> None:
    setup.add_health_check("nhc-rack-00", RACK_00, ["upgrade-window", "CHG-1234"])
    result = act(setup, action)
    assert (result.outcome, result.detail) == ("refused", f"refused: {REASON}")
    assert result.data == {"reason": REASON}
    assert setup.writes() == []
    assert not setup.cluster.nodes([NODE])[0].unschedulable
    if setup.fake is not None:
        assert [r.status for r in setup.fake.sent("GET", path=NHC_PATH)] == [200]


def test_an_unpaused_or_elsewhere_paused_health_check_lets_the_cordon_go(setup: Setup) -> None:
    setup.add_health_check("nhc-all-workers", {}, [])
    other_racks = {"key": "gpu-oncall.io/rack", "operator": "NotIn", "values": ["rack-00"]}
    elsewhere = {"matchExpressions": [other_racks]}
    setup.add_health_check("nhc-other-racks", elsewhere, ["upgrade-window"])
    result = act(setup, "cordon")
    assert result.outcome == "changed"
    assert setup.cluster.nodes([NODE])[0].unschedulable


def test_uncordon_does_not_read_health_checks(setup: Setup) -> None:
    assert act(setup, "cordon").outcome == "changed"
    setup.add_health_check("nhc-rack-00", RACK_00, ["upgrade-window"])
    before = len(setup.fake.sent("GET", path=NHC_PATH)) if setup.fake else 0
    assert act(setup, "uncordon").outcome == "changed"
    if setup.fake is not None:
        assert len(setup.fake.sent("GET", path=NHC_PATH)) == before

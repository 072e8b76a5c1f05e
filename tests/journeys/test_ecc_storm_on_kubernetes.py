"""The ECC-storm journey against a Kubernetes API (GPU_ONCALL_CLUSTER=kubernetes): the fake API
server on 127.0.0.1 (tests/servers/fake_kube.py), seeded from the ecc-dbe-storm scenario's fleet
and answering with its live node state, pods, events and kernel log.

The journey: telemetry from Debian's Prometheus scraping the same fleet's exporters (what
`sim serve` serves; tests/servers/world.py); the alert reaches the running bot's `POST /alerts`
as Alertmanager sends it; the bot diagnoses it (reads only), waits for approval; `gpu-oncall
approve` in a new process cordons (one PATCH carrying nothing but `spec.unschedulable`, with the
ownership annotations in their own PATCH) and evicts the node's pods (policy/v1 Eviction POSTs,
DaemonSet pods left alone); the evicted load stops on the fleet, as it would on a real node, so
verification passes; `approve` only decides (no simulated resolution); the real alert's
resolution resolves the incident. The runbook is a test copy of ecc-storm with its verification
windows cut from minutes to seconds (like the alerting tests' rules), under its own alert name.

Then, with simulated telemetry and the API for the cluster: a protected node and a node someone
else cordoned are refused (nothing written; the reason is on the timeline); after a human
uncordons a node the bot cordoned, the incident's next actions on it are cancelled (timeline)
and never re-applied; a hostile node name from the CLI never reaches the API.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import SecretStr
from servers.oncall import TOKEN, alert, running_bot, webhook
from servers.prometheus import poll
from servers.world import World, runbook_signals, start_world

from bot.cli import journeys
from bot.cli.terminal import Terminal
from bot.config import (
    KubernetesSettings,
    PolicySettings,
    PrometheusSettings,
    ServerSettings,
    Settings,
    StorageSettings,
)
from bot.wiring.runtime import Runtime, open_runtime
from integrations.signals import load_signal_catalog
from runbooks import RUNBOOK_DIR, SIGNALS_FILE
from simulator import SCENARIO_DIR, Fleet, load_scenario
from storage import approvals as approval_store
from storage import incidents as incident_store
from storage.db import session_scope
from tests.servers.fake_kube import TOKEN as KUBE_TOKEN
from tests.servers.fake_kube import FakeKube, start_fake_kube

NO_PLAN = PolicySettings(drain_checkpoint_deadline_minutes=0)
"""Approved drains run at once: these journeys test the API's writes, not the drain's wait for
a checkpoint (bot/engine/deferred.py; tests/actions/test_drain_after_checkpoint.py)."""

SCENARIO = SCENARIO_DIR / "ecc-dbe-storm.yaml"
NODE = "gpu-node-03"
ALERT = "GPUEccStormSeconds"
RUNBOOK = "ecc-storm-seconds"
MARKERS = ("gpu-oncall.io/cordoned-by", "gpu-oncall.io/incident", "gpu-oncall.io/cordon-reason")


def seconds_runbook(directory: Path) -> Path:
    """The shipped ecc-storm, verifying within 90 s every second over a 10 s window."""
    book = yaml.safe_load((RUNBOOK_DIR / "ecc-storm.yaml").read_text())
    book["metadata"]["name"] = RUNBOOK
    book["triggers"] = {"alerts": [{"alertname": ALERT, "target_label": "Hostname"}]}
    for step in book["steps"]:
        if "verify" in step:
            step["verify"] |= {"within": "90s", "interval": "1s", "window": "10s"}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{RUNBOOK}.yaml").write_text(yaml.safe_dump(book, sort_keys=False))
    return directory


@dataclass
class Stack:
    fleet: Fleet
    world: World
    kube: FakeKube
    settings: Settings
    env: dict[str, str]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    catalog = load_signal_catalog(SIGNALS_FILE)
    fleet = Fleet.from_scenario(load_scenario(SCENARIO), now=lambda: datetime.now(UTC))
    (tmp_path / "prom").mkdir()
    world = start_world(
        tmp_path / "prom", {"ecc": fleet}, catalog=catalog, signals=runbook_signals(["ecc-storm"])
    )
    books = seconds_runbook(tmp_path / "operator-runbooks")  # "runbooks" would shadow the package
    try:
        with start_fake_kube() as kube:
            kube.seed_from_fleet(fleet)
            kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
            settings = Settings(
                storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
                server=ServerSettings(token=SecretStr(TOKEN), workers=2),
                cluster="kubernetes",
                telemetry="prometheus",
                prometheus=PrometheusSettings(
                    url=world.prometheus.url, match={"fleet": "ecc"}, retries=0
                ),
                kubernetes=KubernetesSettings(kubeconfig=kubeconfig, in_cluster=False, retries=0),
                runbook_dirs=[books],
                policy=NO_PLAN,
            )
            env = dict(os.environ) | {
                "GPU_ONCALL_STORAGE__URL": settings.storage.url,
                "GPU_ONCALL_IDENTITY__CLI_USER": "alice",  # who `approve --as cli:alice` is
                "GPU_ONCALL_CLUSTER": "kubernetes",
                "GPU_ONCALL_TELEMETRY": "prometheus",
                "GPU_ONCALL_PROMETHEUS__URL": world.prometheus.url,
                "GPU_ONCALL_PROMETHEUS__MATCH": '{"fleet": "ecc"}',
                "GPU_ONCALL_PROMETHEUS__RETRIES": "0",
                "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(kubeconfig),
                "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
                "GPU_ONCALL_RUNBOOK_DIRS": f'["{books}"]',
                "GPU_ONCALL_POLICY__DRAIN_CHECKPOINT_DEADLINE_MINUTES": "0",  # see NO_PLAN
            }
            yield Stack(fleet, world, kube, settings, env)
    finally:
        world.close()


def writes(kube: FakeKube) -> list[Any]:
    return [r for r in kube.requests if r.method not in ("GET",) and "accessreview" not in r.path]


def evictable(kube: FakeKube, node: str) -> set[str]:
    """The pods a drain must evict: bound to the node, not DaemonSet-owned, not mirrors."""
    out = set()
    for (namespace, name), pod in kube.pods.items():
        owners = pod["metadata"].get("ownerReferences") or []
        mirror = "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})
        daemon = any(o.get("kind") == "DaemonSet" for o in owners)
        if pod["spec"].get("nodeName") == node and not mirror and not daemon:
            out.add(f"/api/v1/namespaces/{namespace}/pods/{name}/eviction")
    return out


def test_ecc_storm_alert_to_cordon_and_evictions_on_the_api(stack: Stack, tmp_path: Path) -> None:
    kube, fleet = stack.kube, stack.fleet
    expected_evictions = evictable(kube, NODE)
    assert expected_evictions
    with running_bot(stack.settings) as bot:
        assert bot.rt.fleet is None and bot.rt.scenario is None
        starts = datetime.now(UTC) - timedelta(minutes=5)
        firing = alert(ALERT, {"Hostname": NODE}, starts_at=starts)
        assert bot.post_alerts(webhook([firing])).status_code == 200
        bot.settle()
        found = _pending(bot.rt)
        assert found is not None, "the alert did not reach an approval"
        incident, run_id = found
        assert incident.layer == "gpu_hardware" and incident.culprits == (NODE,)
        assert writes(kube) == []  # diagnosis only reads
        assert any(r.path == f"/api/v1/nodes/{NODE}" for r in kube.sent("GET"))

        approve = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "approve", incident.ref, "--as", "cli:alice"],
            cwd=tmp_path,
            env=stack.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            poll(
                lambda: approve.poll() is not None
                or expected_evictions <= {r.path for r in kube.sent("POST")},
                what="the drain's evictions to reach the API",
                seconds=60,
            )
            fleet.drain(NODE, grace=timedelta(seconds=30))  # the evicted load stops on the node
            out, err = approve.communicate(timeout=120)
        finally:
            if approve.poll() is None:
                approve.kill()
                approve.communicate()
        assert approve.returncode == 0, err
        assert "Alert resolved" not in out  # approve only decides outside sim mode

        patches = kube.sent("PATCH", path=f"/api/v1/nodes/{NODE}")
        cordons = [p for p in patches if _sets(p.body, "spec", "unschedulable") is True]
        assert len(cordons) == 1
        annotated = [_sets(p.body, "metadata", "annotations") or {} for p in patches]
        owner = next(a for a in annotated if "gpu-oncall.io/cordoned-by" in a)
        assert owner["gpu-oncall.io/cordoned-by"] == "gpu-oncall"
        assert owner["gpu-oncall.io/incident"] == incident.ref
        assert owner["gpu-oncall.io/cordon-reason"].startswith(incident.ref)
        claimed = annotated.index(owner)
        assert claimed < patches.index(cordons[0])  # ownership is claimed before the cordon
        assert "gpu-oncall.io/cordoned-at" in annotated[patches.index(cordons[0]) + 1]
        evictions = [r for r in kube.sent("POST") if r.path.endswith("/eviction")]
        assert {r.path for r in evictions} == expected_evictions
        assert all(r.body["apiVersion"] == "policy/v1" for r in evictions)
        assert all(r.body["kind"] == "Eviction" for r in evictions)
        assert not kube.sent("DELETE")  # a drain never deletes past a PDB
        node = kube.node(NODE)
        assert node["spec"]["unschedulable"] is True
        assert set(MARKERS) <= set(node["metadata"]["annotations"])

        events = _events(bot.rt, incident.id)
        details = [e.summary for e in events if e.kind == "action_succeeded"]
        assert any(f"{NODE} cordoned" in d for d in details)
        drained = f"{NODE} drained: {len(expected_evictions)} pod(s) evicted"
        assert any(drained in d for d in details)
        verified = [(e.kind, e.summary) for e in events if e.kind.startswith("verification")]
        assert [kind for kind, _ in verified] == ["verification_passed"], verified
        assert "alert_resolved" not in [e.kind for e in events]
        assert _state(bot.rt, incident.id) != "resolved"

        ended = alert(
            ALERT,
            {"Hostname": NODE},
            starts_at=starts,
            status="resolved",
            ends_at=datetime.now(UTC),
        )
        assert bot.post_alerts(webhook([ended])).status_code == 200
        poll(
            lambda: _state(bot.rt, incident.id) == "resolved",
            what="the real alert's resolution to resolve the incident",
        )


# --- coexistence, with simulated telemetry and the API for the cluster --------------------


@pytest.fixture
def api_runtime(tmp_path: Path) -> Iterator[tuple[Runtime, FakeKube]]:
    """Sim telemetry (instant verification), the fake API as the cluster, both one fleet."""
    with start_fake_kube() as kube:
        settings = Settings(
            storage=StorageSettings(url=f"sqlite:///{tmp_path / 'oncall.db'}"),
            cluster="kubernetes",
            telemetry="sim",
            kubernetes=KubernetesSettings(
                kubeconfig=kube.write_kubeconfig(tmp_path / "kubeconfig"),
                in_cluster=False,
                retries=0,
            ),
            policy=NO_PLAN,
        )
        with open_runtime(settings, scenario_path=SCENARIO, fresh=True) as rt:
            assert rt.fleet is not None
            kube.seed_from_fleet(rt.fleet)
            yield rt, kube


def _remediate(rt: Runtime) -> dict[str, Any]:
    """alice runs ecc-storm on the node, bob approves (two-person rule for the drain): the
    execute step's results by action."""
    started = journeys.command_journey(
        rt,
        Terminal(io.StringIO()),
        loaded=rt.catalog.get("ecc-storm"),
        inputs={"node": NODE},
        yes=False,
        user="cli:alice",
        interactive=False,
    )
    assert started.status == "awaiting_approval"
    outcome = rt.engine.resume(started.run_id, decision="approve", actor="cli:bob")
    return {r["action"]: r for r in outcome.steps["execute"]["results"]}


def test_a_protected_node_is_blocked_at_its_claim_and_nothing_is_written(
    api_runtime: tuple[Runtime, FakeKube],
) -> None:
    rt, kube = api_runtime
    kube.nodes[NODE]["metadata"]["labels"]["gpu-oncall.io/protected"] = "true"
    results = _remediate(rt)
    assert results["cordon"]["outcome"] == results["drain"]["outcome"] == "blocked"
    assert results["cordon"]["blocked_by"] == "protectedNode"  # the safety check, docs/safety.md
    assert "blocked: gpu-node-03 is protected (label gpu-oncall.io/protected=true)" in (
        results["cordon"]["detail"]
    )
    assert writes(kube) == []
    blocked = [e.summary for e in _events(rt, 1) if e.kind == "action_blocked"]
    assert any("would cordon gpu-node-03; blocked: gpu-node-03 is protected" in s for s in blocked)


def test_a_node_cordoned_by_someone_else_is_refused(
    api_runtime: tuple[Runtime, FakeKube],
) -> None:
    rt, kube = api_runtime
    human_patch(kube, {"spec": {"unschedulable": True}, "metadata": {"annotations": {
        "draino/cordon-by": "draino"}}})
    before = len(writes(kube))
    results = _remediate(rt)
    assert results["cordon"]["outcome"] == results["drain"]["outcome"] == "refused"
    assert "cordoned by someone else (draino/cordon-by=draino)" in results["drain"]["detail"]
    assert len(writes(kube)) == before
    assert not [r for r in kube.sent("POST") if r.path.endswith("/eviction")]


def test_a_human_uncordon_cancels_the_incidents_next_actions(
    api_runtime: tuple[Runtime, FakeKube],
) -> None:
    rt, kube = api_runtime
    first = _remediate(rt)
    assert first["cordon"]["outcome"] == "changed"
    evicted = len([r for r in kube.sent("POST") if r.path.endswith("/eviction")])
    human_patch(kube, {"spec": {"unschedulable": None}})  # what `kubectl uncordon` sends
    before = len(writes(kube))

    again = _remediate(rt)  # the same incident's next run on the node
    assert again["cordon"]["outcome"] == again["drain"]["outcome"] == "cancelled"
    assert "uncordoned by someone else after INC-1 cordoned it" in again["cordon"]["detail"]
    assert len(writes(kube)) == before  # never re-applied
    assert len([r for r in kube.sent("POST") if r.path.endswith("/eviction")]) == evicted
    assert kube.node(NODE)["spec"].get("unschedulable") in (None, False)
    cancelled = [e.summary for e in _events(rt, 1) if e.kind == "action_skipped"]
    assert any(s.startswith("cancelled: gpu-node-03 was uncordoned") for s in cancelled)


def test_a_hostile_node_name_never_reaches_the_api(tmp_path: Path) -> None:
    with start_fake_kube() as kube:
        env = dict(os.environ) | {
            "GPU_ONCALL_STORAGE__URL": f"sqlite:///{tmp_path / 'oncall.db'}",
            "GPU_ONCALL_CLUSTER": "kubernetes",
            "GPU_ONCALL_TELEMETRY": "sim",
            "GPU_ONCALL_KUBERNETES__KUBECONFIG": str(kube.write_kubeconfig(tmp_path / "kc")),
            "GPU_ONCALL_KUBERNETES__IN_CLUSTER": "false",
        }
        for hostile in ("gpu-node-03/../../namespaces", "gpu-node-03?fieldSelector=x", "A B"):
            done = subprocess.run(
                [sys.executable, "-m", "bot.cli.main", "run", "ecc-storm",
                 f"node={hostile}", "--yes"],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 2, done.stdout + done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
        assert kube.requests == []


def human_patch(kube: FakeKube, patch: dict[str, Any]) -> None:
    """A person's `kubectl` change to the node, over the API."""
    response = httpx.patch(
        f"{kube.url}/api/v1/nodes/{NODE}",
        json=patch,
        headers={
            "Authorization": f"Bearer {KUBE_TOKEN}",
            "Content-Type": "application/merge-patch+json",
        },
        timeout=10,
    )
    assert response.status_code == 200, response.text


def _sets(body: Any, *path: str) -> Any:
    """What a patch body sets at `path` (merge/strategic-merge dicts, or JSON-patch ops)."""
    if isinstance(body, list):
        pointer = "/" + "/".join(path)
        for op in body:
            if op.get("path") == pointer and op.get("op") in ("add", "replace"):
                return op.get("value")
        return None
    for key in path:
        if not isinstance(body, dict) or key not in body:
            return None
        body = body[key]
    return body


def _pending(rt: Runtime) -> tuple[Any, str] | None:
    from bot.incidents.views import incident_view

    with session_scope(rt.db) as session:
        row = incident_store.find_open_incident(session, f"{RUNBOOK}:{NODE}")
        if row is None or row.id is None:
            return None
        pending = approval_store.pending_approval_for(session, incident_id=row.id)
        return None if pending is None else (incident_view(row), pending.run_id)


def _events(rt: Runtime, incident_id: int) -> list[Any]:
    from bot.incidents.views import event_views

    with session_scope(rt.db) as session:
        return list(event_views(incident_store.list_events(session, incident_id)))


def _state(rt: Runtime, incident_id: int) -> str:
    with session_scope(rt.db) as session:
        row = incident_store.get_incident(session, incident_id)
        return row.state if row is not None else "missing"

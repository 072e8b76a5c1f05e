"""PrometheusTelemetry when Prometheus is down, slow, overloaded, or guarded (auth, TLS).

Covers: a closed port -> TelemetryUnavailable naming the URL, the library error chained; a
runbook run through the real wiring (`telemetry: prometheus`) against a closed port reaches its
verdict and, approved, completes; it names every missing signal and ranks `telemetry` suspect
(alone: the verdict; under hardware evidence from the kernel log: below it); bounded retries
on 503 (3 attempts with retries=2, then success or TelemetryUnavailable) and none on a 400,
401 or 422; an unreadable answer; a per-query timeout (also sent as Prometheus' own
`timeout`); bearer token, basic auth and custom headers as the server received them; TLS with
a CA file, without one (refused) and with verification off; the environment's CA bundle and
proxy (read once per client) hold, explicit settings and NO_PROXY win over them. Requests go
through a recording proxy in front of a real, empty Prometheus.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from servers.prometheus import PrometheusServer, free_port
from servers.proxy import ProxyScript, RecordingProxy, running, self_signed_cert

from bot.clock import FakeClock, SystemClock
from bot.config import PrometheusSettings, Settings
from bot.engine.running import RunEngine, RunOutcome
from bot.incidents import lifecycle
from bot.wiring.runtime import Runtime, open_runtime
from integrations.errors import TelemetryUnavailable
from integrations.prometheus import PrometheusEndpoint, PrometheusTelemetry
from integrations.signals import SignalCatalog
from integrations.telemetry import SignalQuery
from storage.db import session_scope

QUERY = SignalQuery(signal="gpu.temperature", nodes=("gpu-node-01", "gpu-node-02"))


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus")).start()
    yield server
    server.stop()


def telemetry(url: str, catalog: SignalCatalog, **endpoint: object) -> PrometheusTelemetry:
    options: dict[str, object] = {"retries": 0, "backoff_seconds": 0.0} | endpoint
    return PrometheusTelemetry(PrometheusEndpoint(url, **options), catalog)  # type: ignore[arg-type]


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_a_closed_port_is_telemetry_unavailable_naming_the_url(catalog: SignalCatalog) -> None:
    url = closed_url()
    with pytest.raises(TelemetryUnavailable) as caught:
        telemetry(url, catalog, retries=1).read(QUERY)
    assert caught.value.backend == url
    assert url in str(caught.value) and "gpu.temperature" in str(caught.value)
    assert isinstance(caught.value.__cause__, requests.RequestException)


def run(rt: Runtime, runbook: str, node: str) -> RunOutcome:
    now = rt.engine.deps.clock.now()
    with session_scope(rt.db) as session:
        incident, _ = lifecycle.open_or_attach(
            session,
            runbook=runbook,
            target=node,
            target_kind="node",
            severity="warning",
            title=f"{runbook} {node}",
            fired_at=now,
            detected_at=now,
            actor="cli:alice",
        )
        incident_id = int(incident.id or 0)
    return rt.engine.start(
        rt.catalog.get(runbook), inputs={"node": node}, incident_id=incident_id, requester="t"
    )


def down_settings(settings: Settings, url: str) -> Settings:
    return settings.model_copy(
        update={
            "telemetry": "prometheus",
            "prometheus": PrometheusSettings(url=url, retries=0, timeout_seconds=2),
        }
    )


def test_prometheus_down_run_completes_and_names_the_missing_signals(
    settings: Settings, scenario_dir: Path
) -> None:
    url = closed_url()
    with open_runtime(
        down_settings(settings, url), scenario_path=scenario_dir / "healthy-node.yaml", fresh=True
    ) as rt:
        assert isinstance(rt.deps.telemetry, PrometheusTelemetry)
        assert isinstance(rt.clock, SystemClock)  # real Prometheus: real time
        # The verification window would wait 10 real minutes for a Prometheus that stays
        # down; a fake clock lets it run out at once (the same engine and wiring otherwise).
        rt.engine = RunEngine(
            deps=replace(rt.deps, clock=FakeClock(rt.clock.now())),
            db=rt.db,
            checkpointer=rt.engine.checkpointer,
            catalog=rt.catalog,
        )
        outcome = run(rt, "ecc-storm", "gpu-node-05")
        assert outcome.status == "awaiting_approval"  # an observability ticket
        final = rt.engine.resume(outcome.run_id, decision="approve", actor="cli:bob")
    assert final.status == "completed"
    assert final.steps["confirm_xid"]["status"] == "failed"  # nothing to verify against
    verdict = outcome.verdict
    assert verdict["layer"] == "telemetry"
    assert set(verdict["missing_signals"]) >= {
        "gpu.ecc.dbe_rate",
        "gpu.ecc.sbe_rate",
        "gpu.row_remap.failure",
        "gpu.xid.last",
    }
    suspect = [f for f in verdict["findings"] if f["check_id"] == "telemetry_backend"]
    assert len(suspect) == 1 and url in suspect[0]["summary"]
    assert "telemetry unavailable" in outcome.steps["dbe"]["error"]
    assert outcome.steps["dbe_storm"]["status"] == "unknown"


def test_prometheus_down_under_a_hardware_fault_still_localizes_it_from_the_kernel_log(
    settings: Settings, scenario_dir: Path
) -> None:
    with open_runtime(
        down_settings(settings, closed_url()),
        scenario_path=scenario_dir / "ecc-dbe-storm.yaml",
        fresh=True,
    ) as rt:
        outcome = run(rt, "ecc-storm", "gpu-node-03")
    verdict = outcome.verdict
    assert verdict["layer"] == "gpu_hardware"
    assert verdict["culprits"] == ["gpu-node-03"]
    assert [layer for layer, _ in verdict["ranked"]] == ["gpu_hardware", "telemetry"]
    assert "gpu.ecc.dbe_rate" in verdict["missing_signals"]


def test_503_is_retried_a_bounded_number_of_times(
    prometheus: PrometheusServer, catalog: SignalCatalog
) -> None:
    script = ProxyScript(fail_next=[503, 503])
    with running(RecordingProxy(prometheus.url, script=script)) as proxy:
        result = telemetry(proxy.url, catalog, retries=2).read(QUERY)
        assert len(proxy.received) == 3
        assert result.missing_nodes == QUERY.nodes  # an empty Prometheus: nothing, not zero
        script.fail_next[:] = [503] * 5
        with pytest.raises(TelemetryUnavailable, match="HTTP Status Code 503"):
            telemetry(proxy.url, catalog, retries=2).read(QUERY)
        assert len(proxy.received) == 6


@pytest.mark.parametrize("status", [400, 401, 422])
def test_client_errors_are_not_retried(
    prometheus: PrometheusServer, catalog: SignalCatalog, status: int
) -> None:
    with running(RecordingProxy(prometheus.url, script=ProxyScript(fail_next=[status]))) as proxy:
        with pytest.raises(TelemetryUnavailable, match=f"HTTP Status Code {status}"):
            telemetry(proxy.url, catalog, retries=3).read(QUERY)
        assert len(proxy.received) == 1


BAD_VALUE = (
    b'{"status":"success","data":{"resultType":"vector","result":'
    b'[{"metric":{"Hostname":"gpu-node-01"},"value":[1,"not-a-number"]}]}}'
)


@pytest.mark.parametrize(
    "answer", [(200, BAD_VALUE), (200, b"<html>sign in</html>")], ids=["bad-value", "not-json"]
)
def test_an_unreadable_answer_is_telemetry_unavailable(
    catalog: SignalCatalog, answer: tuple[int, bytes]
) -> None:
    script = ProxyScript(fail_next=[answer])
    with (
        running(RecordingProxy(None, script=script)) as proxy,
        pytest.raises(TelemetryUnavailable) as caught,
    ):
        telemetry(proxy.url, catalog).read(QUERY)
    assert caught.value.backend == proxy.url
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_slow_answer_times_out_and_prometheus_is_told_the_timeout(
    catalog: SignalCatalog,
) -> None:
    script = ProxyScript(hold=threading.Event())
    with running(RecordingProxy(None, script=script)) as proxy:
        with pytest.raises(TelemetryUnavailable, match="timed out"):
            telemetry(proxy.url, catalog, timeout_seconds=0.2).read(QUERY)
        assert proxy.received[0].query["timeout"] == ["0.2s"]


def test_credentials_and_headers_reach_the_server(
    prometheus: PrometheusServer, catalog: SignalCatalog
) -> None:
    basic = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    script = ProxyScript(
        require_headers={"Authorization": "Bearer tok-123", "X-Scope-OrgID": "gpu"}
    )
    with running(RecordingProxy(prometheus.url, script=script)) as proxy:
        guarded = telemetry(
            proxy.url, catalog, bearer_token="tok-123", headers={"X-Scope-OrgID": "gpu"}
        )
        guarded.read(QUERY)
        with pytest.raises(TelemetryUnavailable, match="401"):
            telemetry(proxy.url, catalog).read(QUERY)
        script.require_headers = {"Authorization": basic}
        telemetry(proxy.url, catalog, basic_auth=("alice", "s3cret")).read(QUERY)
    assert proxy.received[0].headers["Authorization"] == "Bearer tok-123"
    assert proxy.received[-1].headers["Authorization"] == basic
    assert "tok-123" not in repr(guarded.endpoint) and "s3cret" not in repr(guarded.endpoint)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_with_a_ca_file_without_one_and_without_verification(
    prometheus: PrometheusServer, catalog: SignalCatalog, tmp_path: Path
) -> None:
    certs = self_signed_cert(tmp_path / "tls")
    with running(RecordingProxy(prometheus.url, tls=certs)) as proxy:
        assert proxy.url.startswith("https://")
        trusted = telemetry(proxy.url, catalog, ca_file=str(certs / "cert.pem")).read(QUERY)
        with pytest.raises(TelemetryUnavailable) as refused:
            telemetry(proxy.url, catalog).read(QUERY)
        unverified = telemetry(proxy.url, catalog, insecure_skip_verify=True).read(QUERY)
    assert trusted.missing_nodes == unverified.missing_nodes == QUERY.nodes
    assert isinstance(refused.value.__cause__, requests.exceptions.SSLError)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_the_environments_ca_bundle_is_trusted_and_explicit_settings_win_over_it(
    prometheus: PrometheusServer,
    catalog: SignalCatalog,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment is read once per client, not per request: what it says still holds."""
    certs = self_signed_cert(tmp_path / "tls")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certs / "cert.pem"))
    with running(RecordingProxy(prometheus.url, tls=certs)) as proxy:
        trusted = telemetry(proxy.url, catalog).read(QUERY)  # no ca_file: the environment's
        other = self_signed_cert(tmp_path / "other")
        with pytest.raises(TelemetryUnavailable):  # an explicit ca_file wins over it
            telemetry(proxy.url, catalog, ca_file=str(other / "cert.pem")).read(QUERY)
        unverified = telemetry(proxy.url, catalog, insecure_skip_verify=True).read(QUERY)
    assert trusted.missing_nodes == unverified.missing_nodes == QUERY.nodes


def test_the_environments_proxy_is_used_unless_no_proxy_names_the_host(
    prometheus: PrometheusServer, catalog: SignalCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("HTTP_PROXY", closed_url())  # a proxy that refuses every connection
    with pytest.raises(TelemetryUnavailable) as refused:
        telemetry(prometheus.url, catalog).read(QUERY)
    assert isinstance(refused.value.__cause__, requests.exceptions.ProxyError)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert telemetry(prometheus.url, catalog).read(QUERY).missing_nodes == QUERY.nodes


def test_settings_build_the_endpoint_with_secrets_unwrapped_only_there(
    settings: Settings,
) -> None:
    from bot.wiring.runtime import make_prometheus_endpoint

    configured = configured_settings(settings)
    endpoint = make_prometheus_endpoint(configured)
    assert endpoint.url == "https://prom.example:9090/prometheus"
    assert endpoint.bearer_token == "s3cr3t-tok"
    assert endpoint.basic_auth is None
    assert endpoint.timeout_seconds == configured.timeouts.http_seconds
    assert endpoint.ca_file == "/etc/ssl/prom-ca.pem"
    assert "s3cr3t-tok" not in repr(configured.prometheus)


def configured_settings(settings: Settings) -> Settings:
    prometheus = PrometheusSettings.model_validate(
        {
            "url": "https://prom.example:9090/prometheus",
            "bearer_token": "s3cr3t-tok",
            "ca_file": "/etc/ssl/prom-ca.pem",
            "match": {"cluster": "h100-east"},
        }
    )
    return settings.model_copy(update={"telemetry": "prometheus", "prometheus": prometheus})

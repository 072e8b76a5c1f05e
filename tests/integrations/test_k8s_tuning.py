"""The Kubernetes adapter's tuning travels as one object: built in bot/wiring from
`settings.kubernetes`, carried whole from KubernetesCluster to its Transport."""

from __future__ import annotations

from bot.config import KubernetesSettings, Settings, TimeoutSettings
from bot.wiring.runtime import make_kubernetes_tuning
from integrations.k8s import KubernetesCluster, KubernetesEndpoint, KubernetesTuning

ENDPOINT = KubernetesEndpoint(host="http://127.0.0.1:9", token="t")
"""Nothing listens there: building the adapter sends no request."""


def test_the_settings_tuning_reaches_the_transport() -> None:
    settings = Settings(
        kubernetes=KubernetesSettings(
            timeout_seconds=3.0, retries=1, backoff_seconds=0.25, qps=5.0, burst=7
        )
    )
    tuning = make_kubernetes_tuning(settings)
    transport = KubernetesCluster.from_endpoint(ENDPOINT, tuning=tuning).transport
    assert tuning == KubernetesTuning(
        timeout_seconds=3.0, retries=1, backoff_seconds=0.25, qps=5.0, burst=7
    )
    assert (transport.timeout, transport.retries, transport.backoff) == (3.0, 1, 0.25)
    assert (transport._bucket.qps, transport._bucket.burst, transport.page_size) == (5.0, 7, 500)


def test_an_unset_kubernetes_timeout_is_the_http_timeout() -> None:
    settings = Settings(timeouts=TimeoutSettings(http_seconds=2.5))
    assert make_kubernetes_tuning(settings).timeout_seconds == 2.5


def test_one_tuning_field_given_as_an_option_wins_over_the_tuning() -> None:
    tuning = KubernetesTuning(retries=4, page_size=50)
    transport = KubernetesCluster.from_endpoint(ENDPOINT, tuning=tuning, retries=0).transport
    assert (transport.retries, transport.page_size) == (0, 50)

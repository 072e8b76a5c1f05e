"""PrometheusTelemetry: the Telemetry port answered by a real Prometheus (prometheus-api-client).

The only importer of `prometheus_api_client`. Each read renders ONE PromQL query for the whole
node set (integrations.promql) and calls only `custom_query` / `custom_query_range`; the library's
label-matcher helpers do no escaping and are never used. Every library or `requests` error
becomes `TelemetryUnavailable(backend=url)` with `raise ... from exc`. Thread-safe: each thread
gets its own client (a `requests.Session` is not meant to be shared across threads).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import requests
import urllib3
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from integrations.errors import TelemetryUnavailable
from integrations.promql import MISSING_LABEL, SignalQueryText, render_signal
from integrations.signals import DEFAULT_HOST_LABELS, DEFAULT_WORKLOAD_LABELS, SignalCatalog
from integrations.telemetry import Sample, SeriesPoints, SignalQuery, SignalResult

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

#: Statuses worth retrying: overload and gateway errors, never a bad query (400/422).
RETRY_STATUSES = (429, 502, 503, 504)
_ERRORS = (PrometheusApiClientException, requests.RequestException, ValueError, KeyError)


@dataclass(frozen=True)
class PrometheusEndpoint:
    """How to reach one Prometheus: URL, auth, TLS, timeout and retries (no secret in repr)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    bearer_token: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    ca_file: str | None = None
    """PEM bundle that signs the server's certificate (default: the system trust store)."""
    insecure_skip_verify: bool = False
    timeout_seconds: float = 5.0
    """Per query: the HTTP timeout, and the `timeout` Prometheus itself stops evaluating at."""
    retries: int = 2
    """Retries after a refused connection or a 429/502/503/504; 0 = one attempt only."""
    backoff_seconds: float = 0.2

    def connect(self) -> PrometheusConnect:
        """A new client with its own session (one per thread).

        The environment `requests` would read on every request (HTTP(S)_PROXY and NO_PROXY,
        REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE, ~/.netrc) is read once, here, for this URL:
        looking it up per request cost ~0.15 ms of CPU per query, a fifth of a read (issue 21).
        Explicit settings win over it, as before: `ca_file`, `insecure_skip_verify`, the
        credentials."""
        session = requests.Session()
        session.trust_env = False
        session.proxies.update(requests.utils.get_environ_proxies(self.url))
        if self.insecure_skip_verify:
            session.verify = False
        else:
            bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            session.verify = self.ca_file or bundle or True
        headers = dict(self.headers)
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token}"
        retry = Retry(
            total=self.retries,
            backoff_factor=self.backoff_seconds,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=frozenset({"GET"}),
            raise_on_status=False,
        )
        return PrometheusConnect(
            url=self.url.rstrip("/"),
            headers=headers or None,
            retry=retry,
            auth=self.basic_auth or requests.utils.get_netrc_auth(self.url),
            session=session,
            timeout=self.timeout_seconds,
        )


class PrometheusTelemetry:
    """Reads named signals from Prometheus: one query per signal, whatever the node count.

    `match` adds label matchers to every selector (e.g. `{"cluster": "h100-east"}` when one
    Prometheus holds several clusters). `now`, when given, pins each query's evaluation time
    to the bot's clock; otherwise Prometheus evaluates at its own current time.
    """

    def __init__(
        self,
        endpoint: PrometheusEndpoint,
        catalog: SignalCatalog,
        *,
        host_labels: Mapping[str, str] = DEFAULT_HOST_LABELS,
        workload_labels: Mapping[str, str] = DEFAULT_WORKLOAD_LABELS,
        match: Mapping[str, str] | None = None,
        now: Callable[[], datetime] | None = None,
        max_workers: int = 8,
    ) -> None:
        self.endpoint = endpoint
        self.catalog = catalog
        self.host_labels = {**DEFAULT_HOST_LABELS, **host_labels}
        self.workload_labels = {**DEFAULT_WORKLOAD_LABELS, **workload_labels}
        self.match = dict(match or {})
        self.max_workers = max_workers
        self.queries = 0
        self._now = now
        self._lock = threading.Lock()
        self._local = threading.local()

    def render(self, query: SignalQuery) -> SignalQueryText:
        """The PromQL this adapter sends for `query` (pure; for logs, docs and tests)."""
        spec = self.catalog.get(query.signal)
        return render_signal(
            spec,
            window=query.window,
            host_label=self.host_labels[spec.source],
            nodes=query.nodes,
            workload=query.workload,
            workload_label=self.workload_labels.get(spec.source),
            pod_label=self.workload_labels["kube_state_metrics"],
            match=self.match,
        )

    def read(self, query: SignalQuery) -> SignalResult:
        """One instant query for `query.signal` over all its nodes.

        Nodes without a sample are listed in `missing_nodes`. Raises UnknownSignal for a signal
        the catalog lacks, TelemetryUnavailable when Prometheus cannot answer.
        """
        rendered = self.render(query)
        params: dict[str, str] = {"timeout": f"{self.endpoint.timeout_seconds:g}s"}
        if self._now is not None:
            params["time"] = f"{self._now().timestamp():.3f}"
        rows = self._call(query.signal, lambda c: c.custom_query(rendered.promql, params=params))
        return self._parse(query.signal, lambda: _result(query, rendered, rows))

    def read_many(self, queries: Sequence[SignalQuery]) -> list[SignalResult]:
        """Read several signals concurrently (one query each), results in the same order."""
        if len(queries) <= 1:
            return [self.read(q) for q in queries]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(queries))) as pool:
            return list(pool.map(self.read, queries))

    def read_range(
        self, query: SignalQuery, *, start: datetime, end: datetime, step: timedelta
    ) -> list[SeriesPoints]:
        """The signal evaluated every `step` over `[start, end]` (one range query), e.g. for
        the metric picture of a postmortem. Each point uses `query.window` as its range."""
        rendered = self.render(query)
        seconds = f"{step.total_seconds():g}s"
        rows = self._call(
            query.signal,
            lambda c: c.custom_query_range(
                rendered.promql, start_time=start, end_time=end, step=seconds
            ),
        )
        return self._parse(query.signal, lambda: _series(query, rendered, rows, tz=start.tzinfo))

    def _parse(self, signal: str, parse: Callable[[], _T]) -> _T:
        """Run `parse` over an answer; a malformed one is TelemetryUnavailable too."""
        try:
            return parse()
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise TelemetryUnavailable(
                f"Prometheus at {self.endpoint.url} sent an unreadable answer for signal "
                f"'{signal}': {type(exc).__name__}",
                backend=self.endpoint.url,
            ) from exc

    def _call(self, signal: str, send: Callable[[PrometheusConnect], Any]) -> list[dict[str, Any]]:
        with self._lock:
            self.queries += 1
        try:
            rows = send(self._client())
        except _ERRORS as exc:
            raise TelemetryUnavailable(
                f"Prometheus at {self.endpoint.url} did not answer for signal '{signal}': "
                f"{_reason(exc)}",
                backend=self.endpoint.url,
            ) from exc
        logger.debug("prometheus query for %s: %d series", signal, len(rows or []))
        if not isinstance(rows, list):
            raise TelemetryUnavailable(
                f"Prometheus at {self.endpoint.url} sent an unexpected answer for '{signal}'",
                backend=self.endpoint.url,
            )
        return rows

    def _client(self) -> PrometheusConnect:
        client: PrometheusConnect | None = getattr(self._local, "client", None)
        if client is None:
            client = self.endpoint.connect()
            self._local.client = client
        return client


def _result(
    query: SignalQuery, rendered: SignalQueryText, rows: list[dict[str, Any]]
) -> SignalResult:
    """Samples from the answer's rows; marker rows name resolved nodes that have none."""
    samples: list[Sample] = []
    listed: set[str] = set()
    for row in rows:
        metric = row["metric"]
        node = str(metric.get(rendered.host_label, ""))
        value = float(row["value"][1])
        if metric.get(MISSING_LABEL):
            listed.add(node)
        elif node and not math.isnan(value):
            samples.append(Sample(node=node, value=value, labels=_identity(metric, rendered)))
    if query.nodes:
        wanted = set(query.nodes)
        samples = [s for s in samples if s.node in wanted]
        seen = {s.node for s in samples}
        missing = tuple(n for n in dict.fromkeys(query.nodes) if n not in seen)
    else:  # the nodes the query itself resolved (a workload's, or the fleet's)
        seen = {s.node for s in samples}
        missing = tuple(sorted(n for n in listed - seen if n))
    return SignalResult(
        signal=query.signal, samples=tuple(samples), missing_nodes=missing, queries=1
    )


def _series(
    query: SignalQuery, rendered: SignalQueryText, rows: list[dict[str, Any]], *, tz: Any
) -> list[SeriesPoints]:
    out: list[SeriesPoints] = []
    for row in rows:
        metric = row["metric"]
        node = str(metric.get(rendered.host_label, ""))
        if metric.get(MISSING_LABEL) or not node or (query.nodes and node not in query.nodes):
            continue
        points = tuple(
            (datetime.fromtimestamp(float(ts), tz=tz), float(v))
            for ts, v in row["values"]
            if not math.isnan(float(v))
        )
        out.append(SeriesPoints(node, _identity(metric, rendered), points))
    return out


def _identity(metric: Mapping[str, Any], rendered: SignalQueryText) -> dict[str, str]:
    return {k: str(metric[k]) for k in rendered.labels if k in metric and k != rendered.host_label}


def _reason(exc: BaseException) -> str:
    """A short cause without the request URL (which can be long) or any header."""
    cause = exc.args[0] if exc.args else None
    if isinstance(exc, requests.Timeout) or isinstance(
        getattr(cause, "reason", None), urllib3.exceptions.TimeoutError
    ):
        return "timed out (slow queries: raise GPU_ONCALL_PROMETHEUS__TIMEOUT_SECONDS)"
    if isinstance(exc, requests.ConnectionError):
        return "connection failed (is it running, and is the URL right?)"
    if isinstance(exc, requests.exceptions.RetryError):
        return "still failing after retries"
    text = str(exc)
    return text if len(text) <= 300 else text[:300] + "..."

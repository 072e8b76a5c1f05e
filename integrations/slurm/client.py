"""The slurmrestd client: JWT headers, version detection, retries and error translation.

Our own small client over the few OpenAPI shapes `SlurmCluster` uses, never a generated one
pinned to one version. At start it reads `/openapi/v3` once and picks the newest `slurm/v0.0.N`
it knows, noting which calls that version serves (22.05's v0.0.38 has no node update; 24.11's
v0.0.40+ has `POST node/{name}` and `DELETE jobs/`). Every request has a timeout; transport
errors and 429/502/503/504 are retried with bounded exponential backoff; answers become
`integrations.errors` (`raise ... from exc`), an authentication failure naming the setting to
fix. Slurm's 500 carries its own errors list (22.05 answers an unknown node with 500 and errno
2018), so a 500 is read, never retried.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from integrations.errors import ClusterError, ClusterForbidden
from integrations.throttling import backoff_delay

logger = logging.getLogger(__name__)

#: REST versions this client speaks, newest first (their node/job shapes are read tolerantly).
KNOWN_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38", "v0.0.37")
RETRIED_STATUS = frozenset({429, 502, 503, 504})
AUTH_STATUS = frozenset({401, 511})
_VERSION_PATH = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/")
TOKEN_HINT = (
    "set GPU_ONCALL_SLURM__TOKEN to a JWT for an operator "
    "(`scontrol token username=<user> lifespan=<seconds>` as root or SlurmUser) and "
    "GPU_ONCALL_SLURM__USER to that user"
)


@dataclass(frozen=True)
class ApiVersion:
    """The REST version in use and the calls it serves (from slurmrestd's own OpenAPI)."""

    version: str
    node_update: bool  # POST node/{node_name}
    jobs_delete: bool  # DELETE jobs/ (cancel by node)
    served: tuple[str, ...] = ()


class SlurmRest:
    """Requests to slurmrestd as one user with one token (`X-SLURM-USER-NAME`/`-TOKEN`)."""

    def __init__(
        self,
        http: httpx.Client,
        *,
        user: str,
        token: str,
        retries: int = 3,
        backoff_seconds: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.http, self.user = http, user
        self._token = token
        self.retries, self.backoff, self._sleep = retries, backoff_seconds, sleep
        self.calls = 0  # requests sent (bench/slurm_calls.py reads it)
        self._api: ApiVersion | None = None

    @property
    def url(self) -> str:
        return str(self.http.base_url)

    @property
    def detected(self) -> ApiVersion | None:
        """The version detected so far, without detecting it."""
        return self._api

    @property
    def api(self) -> ApiVersion:
        """The detected version (detected on first use)."""
        if self._api is None:
            self._api = self.detect()
        return self._api

    def detect(self) -> ApiVersion:
        """Read `/openapi/v3` and pick the newest known version slurmrestd serves."""
        spec = self.request("GET", "/openapi/v3", what="read the OpenAPI description")
        paths: dict[str, Any] = spec.get("paths") or {}
        served = sorted({m[1] for p in paths if (m := _VERSION_PATH.match(p))}, reverse=True)
        usable = [v for v in KNOWN_VERSIONS if v in served]
        if not usable:
            raise ClusterError(
                f"slurmrestd at {self.url} serves {', '.join(served) or 'no slurm/ API'}; the bot "
                f"speaks {', '.join(KNOWN_VERSIONS)}: start slurmrestd with "
                "`-s openapi/v0.0.38` (22.05) or `-s openapi/slurmctld` (23.11+)"
            )
        version = usable[0]
        node_path = paths.get(f"/slurm/{version}/node/{{node_name}}") or {}
        jobs_path = paths.get(f"/slurm/{version}/jobs/") or {}
        return ApiVersion(version, "post" in node_path, "delete" in jobs_path, tuple(served))

    def slurm(self, method: str, path: str, *, what: str, **options: Any) -> dict[str, Any]:
        """A call under `/slurm/<version>/`."""
        return self.request(method, f"/slurm/{self.api.version}/{path}", what=what, **options)

    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        missing: Callable[[], ClusterError] | None = None,
        json: Any = None,
        params: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One call, retried on transport errors and 429/502/503/504, translated."""
        for attempt in range(self.retries + 1):
            self.calls += 1
            try:
                response = self.http.request(
                    method, path, json=json, params=params, headers=self._headers()
                )
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise ClusterError(
                        f"slurmrestd at {self.url} unreachable ({type(exc).__name__}) after "
                        f"{attempt + 1} attempts: {what}"
                    ) from exc
            else:
                if response.status_code not in RETRIED_STATUS or attempt == self.retries:
                    return self._answer(response, what=what, missing=missing)
            delay = backoff_delay(attempt, base=self.backoff)
            logger.info("retrying slurmrestd %s %s in %.2fs", method, path, delay)
            self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def _headers(self) -> dict[str, str]:
        return {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token}

    def _answer(
        self, response: httpx.Response, *, what: str, missing: Callable[[], ClusterError] | None
    ) -> dict[str, Any]:
        status = response.status_code
        body = _json(response)
        errors = body.get("errors") or []
        if status in AUTH_STATUS:
            raise ClusterForbidden(
                f"slurmrestd at {self.url} refused the bot's token for user '{self.user}' "
                f"(HTTP {status}) trying to {what}: {TOKEN_HINT}"
            )
        if status == 403:
            raise ClusterForbidden(
                f"slurmrestd refused to {what} for user '{self.user}' (HTTP 403): the user must "
                f"be a Slurm operator; {TOKEN_HINT}"
            )
        if missing is not None and _names_missing(errors):
            raise missing()
        if status == 405:
            raise ClusterError(f"slurmrestd at {self.url} has no such call: {what} (HTTP 405)")
        if status >= 400 or errors:
            raise ClusterError(
                f"slurmrestd could not {what} (HTTP {status}): {_describe(errors, response)}"
                + (" (22.05 also answers an invalid or expired token so)" if status == 500 else "")
            )
        return body


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


MISSING_ERRNO = frozenset({2017, 2018})  # ESLURM_INVALID_JOB_ID, ESLURM_INVALID_NODE_NAME


def _names_missing(errors: list[Any]) -> bool:
    for error in errors:
        if not isinstance(error, dict):
            continue
        text = f"{error.get('error', '')} {error.get('description', '')}".lower()
        if error.get("errno") in MISSING_ERRNO or "invalid job id" in text:
            return True
        if "invalid node name" in text or "unable to query node" in text:
            return True
    return False


def _describe(errors: list[Any], response: httpx.Response) -> str:
    texts = []
    for error in errors:
        if isinstance(error, dict):
            parts = [str(error.get(k)) for k in ("error", "description") if error.get(k)]
            texts.append(
                " ".join(parts) + (f" (errno {error['errno']})" if "errno" in error else "")
            )
    return "; ".join(texts) or response.text[:200] or "no message"

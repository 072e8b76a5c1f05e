"""The NodeAgent port: ask an agent on a node to reset a GPU or reboot the node.

`HttpNodeAgent` POSTs `{"node", "gpu", "action", "idempotency_key"}` to a configured endpoint
(a DaemonSet on each node, or a fleet service that reaches them) and reads `{"outcome",
"detail"}`. The same idempotency key must give the same answer: a retried request never resets
twice. Every request has a timeout; every failure becomes NodeAgentError naming the endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import httpx

from integrations.errors import IntegrationError

OUTCOMES = frozenset({"changed", "already_done", "failed"})


class NodeAgentError(IntegrationError):
    """The node agent could not be reached, timed out, or gave an answer we cannot read."""

    retryable = True


@dataclass(frozen=True)
class AgentRequest:
    node: str
    action: str  # gpu_reset | reboot
    idempotency_key: str
    gpu: str | None = None
    """GPU index for gpu_reset; None: every GPU of the node."""


@dataclass(frozen=True)
class AgentResult:
    outcome: str  # changed | already_done | failed
    detail: str


class NodeAgent(Protocol):
    def request(self, request: AgentRequest) -> AgentResult:
        """Carry the request out on the node and say what happened."""
        ...


class HttpNodeAgent:
    """The node agent behind one HTTP endpoint (timeouts come with the injected client)."""

    def __init__(self, url: str, *, client: httpx.Client, token: str | None = None) -> None:
        self._url, self._client, self._token = url, client, token

    def request(self, request: AgentRequest) -> AgentResult:
        headers = {"Idempotency-Key": request.idempotency_key}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        body = {
            "node": request.node,
            "gpu": request.gpu,
            "action": request.action,
            "idempotency_key": request.idempotency_key,
        }
        try:
            response = self._client.post(self._url, json=body, headers=headers)
            response.raise_for_status()
            data = response.json()
        except httpx.TimeoutException as exc:
            raise NodeAgentError(f"node agent {self._url} timed out") from exc
        except httpx.HTTPStatusError as exc:
            code = exc.response.status_code
            raise NodeAgentError(f"node agent {self._url} answered HTTP {code}") from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise NodeAgentError(f"node agent {self._url} failed: {type(exc).__name__}") from exc
        outcome = str(data.get("outcome", "")) if isinstance(data, dict) else ""
        if outcome not in OUTCOMES:
            raise NodeAgentError(
                f"node agent {self._url} answered outcome '{outcome}' "
                f"(expected one of {', '.join(sorted(OUTCOMES))})"
            )
        return AgentResult(outcome=outcome, detail=str(data.get("detail", "")))

"""Errors raised by ports and adapters. Adapters translate library errors into these with
`raise ... from exc`; nothing above `integrations/` ever sees a library exception.

Each class says whether a retry can help (`retryable`).
"""

from __future__ import annotations


class IntegrationError(Exception):
    """Root of every error raised by `integrations/`."""

    retryable = False


class InvalidName(IntegrationError, ValueError):
    """A node, pod or label value failed validation before it reached a backend."""


class TelemetryUnavailable(IntegrationError):
    """The telemetry backend could not answer at all (down, timed out, refused)."""

    retryable = True

    def __init__(self, message: str, *, backend: str = "") -> None:
        super().__init__(message)
        self.backend = backend


class UnknownSignal(IntegrationError, KeyError):
    """A signal name that the signal catalog does not define."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown signal"


class ClusterError(IntegrationError):
    """A cluster call (Kubernetes, Slurm) failed."""

    retryable = True


class ReadUnsupported(ClusterError):
    """The backend has no way to serve this read (Slurm keeps no kernel log): an unavailable
    input with the reason, never retried."""

    retryable = False


class NodeNotFound(ClusterError):
    """The named node does not exist in the cluster."""

    retryable = False

    def __init__(self, node: str, known: list[str] | None = None) -> None:
        hint = ""
        if known:
            shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
            hint = f" (nodes: {shown})"
        super().__init__(f"node '{node}' not found{hint}")
        self.node = node


class JobNotFound(ClusterError):
    """The named Job does not exist (it was never created, or its TTL removed it)."""

    retryable = False

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(f"job '{namespace}/{name}' not found")
        self.name, self.namespace = name, namespace


class InvalidObject(ClusterError):
    """An object the bot was about to send is not valid for its API (checked before sending)."""

    retryable = False


RBAC_FILE = "deploy/kubernetes/base/clusterrole.yaml"


class ClusterForbidden(ClusterError):
    """RBAC refused the call (HTTP 403). `verb` and `resource` say which permission is missing
    (`resource` may carry a subresource: `pods/eviction`)."""

    retryable = False

    def __init__(self, message: str = "", *, verb: str = "", resource: str = "") -> None:
        super().__init__(message or forbidden_message(verb=verb, resource=resource))
        self.verb = verb
        self.resource = resource


def forbidden_message(*, verb: str, resource: str) -> str:
    """The one line an operator reads when RBAC says no, naming the missing permission."""
    return (
        f"RBAC: the bot may not {verb} {resource}; grant it in the ClusterRole ({RBAC_FILE})"
    )


class ClusterConflict(ClusterError):
    """The object changed underneath us (HTTP 409)."""


class EvictionBlocked(ClusterError):
    """The Eviction API refused: a PodDisruptionBudget said no (HTTP 429)."""


class PodNotFound(ClusterError):
    """The named pod does not exist in the namespace."""

    retryable = False

    def __init__(self, pod: str, namespace: str) -> None:
        super().__init__(f"pod '{namespace}/{pod}' not found")
        self.pod = pod
        self.namespace = namespace


class ScenarioError(IntegrationError):
    """A simulated-fleet scenario file is malformed or refers to things the fleet lacks.

    The message names the file and the field path, and says what is valid.
    """

"""What every action shares: the context it runs in, the result it returns, its spec (name,
risk, target kind, the function) and the registry that finds a spec by name. The catalogue of
built-in actions is bot/actions/registry.py; node-agent and workload actions build on these
types in their own modules.

Actions are idempotent ("already cordoned" is a result, not an error), return data, and never
talk to Slack or the terminal themselves (presentation renders their results).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.actions.policy import Risk
from bot.clock import Clock
from bot.errors import UserInputError
from integrations.alertmanager import Silences
from integrations.cluster import Cluster
from integrations.tickets import Tickets


@dataclass(frozen=True)
class ActionContext:
    cluster: Cluster
    clock: Clock
    tickets: Tickets
    run_id: str
    incident: str
    idempotency_key: str
    verdict: Mapping[str, Any] = field(default_factory=dict)
    silences: Silences | None = None


@dataclass(frozen=True)
class ActionResult:
    outcome: str  # changed | already_done | skipped | failed | dry_run | refused | cancelled
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "detail": self.detail, "data": self.data}


ActionFn = Callable[[ActionContext, str, Mapping[str, Any]], ActionResult]


@dataclass(frozen=True)
class ActionSpec:
    name: str
    risk: Risk
    help: str
    target_kind: str  # node | workload
    destructive: bool
    run: ActionFn
    #: Carried out once per incident, not once per run: a re-run of the incident finds the
    #: first run's result (a second RMA ticket for one GPU is a second RMA).
    per_incident: bool = False

    def describe(self, target: str, params: Mapping[str, Any]) -> str:
        extra = ", ".join(f"{k}={v}" for k, v in params.items())
        return f"{self.name} {target}" + (f" ({extra})" if extra else "")


class ActionRegistry:
    def __init__(self, specs: list[ActionSpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Any:
        return iter(sorted(self._specs))

    def names(self) -> list[str]:
        return sorted(self._specs)

    def get(self, name: str) -> ActionSpec:
        try:
            return self._specs[name]
        except KeyError:
            raise UserInputError(
                f"unknown action '{name}' (actions: {', '.join(self.names())})"
            ) from None

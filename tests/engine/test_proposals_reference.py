"""A propose step's proposals against the code they replaced (kept here as a reference): each
distinct `when` text is now evaluated once per step, however many proposals repeat it (the
shipped ecc-storm repeats one three times). On generated propose lists (repeated, negated and
failing conditions) and generated verdicts, the proposals, or the error and its field, are the
reference's.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.actions.registry import default_registry
from bot.engine.expressions import ExpressionError
from bot.engine.loading import LoadedRunbook, parse_runbook
from bot.engine.schema import Step
from bot.engine.steps import remediate
from bot.errors import StepError
from integrations.signals import load_signal_catalog
from runbooks import SIGNALS_FILE

ACTIONS = default_registry()
SIGNALS = load_signal_catalog(SIGNALS_FILE).names()
CRITICAL = "where.findings.exists(f, f.severity == 'critical')"
WHENS = (
    None,
    f"where.layer == 'gpu_hardware' && {CRITICAL}",
    f"where.layer == 'gpu_hardware' && !{CRITICAL}",
    "where.layer == 'telemetry'",
    "where.nope == 'x'",  # no such field: fails at run time
    "where.findings.size() > 1",
)


def reference_proposals(
    step: Step, loaded: LoadedRunbook, context: dict[str, Any], deps: Any
) -> list[dict[str, Any]]:
    proposals = []
    for index, proposal in enumerate(step.propose or []):
        where = f"propose.{index}"
        if proposal.when is not None:
            try:
                if not loaded.expression(step.id, f"{where}.when").test(context):
                    continue
            except ExpressionError as exc:
                raise remediate.step_error(loaded, step, f"{where}.when", exc) from exc
        params: dict[str, Any] = {}
        for key, value in proposal.params.items():
            params[key] = remediate._render_param(
                loaded, step, f"{where}.params.{key}", value, context
            )
        spec = deps.actions.get(proposal.action)
        for target in remediate._targets(step, loaded, where, context):
            proposals.append(
                {
                    "action": proposal.action,
                    "target": target,
                    "params": params,
                    "risk": spec.risk.value,
                    "destructive": spec.destructive,
                    "reason": proposal.reason,
                    "description": spec.describe(target, params),
                }
            )
    return proposals


def runbook(propose: list[dict[str, Any]]) -> LoadedRunbook:
    raw = {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Runbook",
        "metadata": {"name": "generated"},
        "inputs": {"node": {"type": "node", "required": True}},
        "steps": [
            {"id": "dbe", "signal": "gpu.ecc.dbe_rate"},
            {"id": "storm", "check": "dbe.max > 0.0", "layer": "gpu_hardware",
             "severity": "critical", "finding": "ECC errors", "culprit": {"node": "{{ node }}"}},
            {"id": "where", "localize": {}},
            {"id": "fix", "propose": propose},
        ],
    }  # fmt: skip
    return parse_runbook(raw, file="generated.yaml", signals=SIGNALS, actions=ACTIONS.names())


proposal = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["cordon", "drain", "open_ticket"]),
        "reason": st.sampled_from(["keep work off", "evict"]),
    },
    optional={"when": st.sampled_from(WHENS[1:])},
)
verdicts = st.fixed_dictionaries(
    {
        "layer": st.sampled_from(["gpu_hardware", "telemetry", "none"]),
        "findings": st.lists(
            st.fixed_dictionaries({"severity": st.sampled_from(["critical", "warning"])}),
            max_size=3,
        ),
    }
)


def outcome(propose: Any, *args: Any) -> Any:
    try:
        return propose(*args)
    except StepError as err:
        return ("error", str(err), err.field)


@settings(max_examples=60, deadline=None)
@given(propose=st.lists(proposal, min_size=1, max_size=6), verdict=verdicts)
def test_proposals_are_the_reference_on_generated_steps(
    propose: list[dict[str, Any]], verdict: dict[str, Any]
) -> None:
    loaded = runbook(propose)
    step = loaded.runbook.step("fix")
    context = {"node": "gpu-node-03", "target": "gpu-node-03", "where": verdict}
    deps = SimpleNamespace(actions=ACTIONS)
    assert outcome(remediate._proposals, step, loaded, context, deps) == outcome(
        reference_proposals, step, loaded, context, deps
    )

"""The localize step: every check outcome -> a verdict (bot.diagnosis.localizing), then, when
the runbook asks for it, cross-node correlation (bot.diagnosis.correlating) over the per-node
labels its source steps gathered."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from bot.diagnosis.correlating import correlate
from bot.diagnosis.findings import CheckOutcome
from bot.diagnosis.localizing import localize
from bot.engine.loading import LoadedRunbook
from bot.engine.schema import Step, StepKind
from bot.engine.state import Deps, RunState
from bot.engine.steps.backends import backend_outcome
from bot.engine.steps.cluster_gaps import cluster_gaps
from bot.engine.steps.common import output
from bot.engine.steps.freshness import held_notes
from bot.engine.steps.gather import NodeFn
from bot.engine.steps.liveness import dcgm_signal_names, discount, probe, stuck_notes
from bot.engine.steps.log_age import history_notes
from bot.engine.steps.remembering import look_back_ahead, with_history


def make_localize_node(step: Step, loaded: LoadedRunbook) -> NodeFn:
    checks = [s.id for s in loaded.runbook.steps if s.kind is StepKind.CHECK]
    spec = step.localize.correlate if step.localize else None
    symptom = step.localize.symptom if step.localize else None

    def localize_node(state: RunState, runtime: Runtime[Deps]) -> dict[str, Any]:
        steps = state.get("steps", {})
        outcomes = [CheckOutcome.from_dict(steps[c]) for c in checks if c in steps]
        unavailable = backend_outcome(steps)  # a backend down: telemetry suspect
        ahead = look_back_ahead(outcomes, runtime.context)  # read during the probe
        alive = probe(runtime.context, steps)  # a stuck exporter: its values are the past
        outcomes = discount(outcomes, alive, dcgm_signals=dcgm_signal_names(runtime.context))
        extra = [o for o in (unavailable, alive.outcome) if o is not None]
        verdict = localize(outcomes + extra, symptom=symptom)
        if spec is not None:
            labels = node_labels(steps[s] for s in spec.sources if s in steps)
            verdict = correlate(
                verdict,
                labels,
                domains=spec.domains,
                min_nodes=spec.min_nodes,
                min_share=spec.min_share,
            )
        notes = held_notes(steps) + stuck_notes(alive) + history_notes(steps)  # + old logs
        notes += tuple(cluster_gaps(steps))  # failed cluster reads, with why
        verdict = replace(verdict, detectors=notes)
        verdict = with_history(
            verdict, runtime.context, incident=state.get("incident"), ahead=ahead
        )
        return output(step, verdict.to_dict())

    return localize_node


def node_labels(outputs: Any) -> dict[str, dict[str, str]]:
    """Node -> label -> value, merged from cluster `node` reads (the node's Kubernetes labels)
    and signal summaries (the `keep_labels` of each node's samples)."""
    merged: dict[str, dict[str, str]] = {}
    for data in outputs:
        if data.get("kind") == "cluster":
            for item in data.get("items", []):
                merged.setdefault(item["name"], {}).update(item.get("labels") or {})
        for node, labels in (data.get("node_labels") or {}).items():
            merged.setdefault(node, {}).update(labels)
    return merged

"""`gpu-oncall eval`: run scenario files through their triggers and score the diagnoses.

Each scenario gets a fresh simulated fleet and an isolated runtime (an in-memory SQLite
database and checkpointer, opened through `wiring.open_runtime` like every command). Its
trigger goes the production way: an `alert` (or a `storm`: one webhook with an alert per node)
through intake (parse_webhook -> receive_webhook with the configured storm policy -> the routed
runbook and target, or a storm's parent incident and its storm runbook), a `command` through the
`/gpu` verb grammar.
The run stops at its approval (or ends, when nothing is proposed); nothing is ever executed.

The runtime never sees a scenario's `expect` block: the fleet is built from a copy without it,
and `expect` is only compared with the verdict afterwards (`score`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.diagnosis.mechanisms import MECHANISMS
from bot.engine.running import RunOutcome
from bot.errors import OncallError, UserInputError
from bot.evaluation.scoring import ScenarioResult, score
from bot.intake import commands as grammar
from bot.intake.alerts import parse_webhook
from bot.intake.receiving import receive_webhook
from bot.intake.storms import StormPolicy
from bot.wiring.runtime import Runtime, load_catalogs, open_runtime
from integrations.errors import IntegrationError
from runbooks import LOG_SIGNATURES_FILE
from simulator.scenarios import Scenario, load_scenario
from simulator.telemetry import SimTelemetry
from storage.db import session_scope

EVAL_REQUESTER = "eval"


@dataclass(frozen=True)
class Triggered:
    """What a trigger started: the run's outcome, or why nothing could start."""

    runbook: str | None
    outcome: RunOutcome | None = None
    error: str | None = None


def scenario_files(paths: Iterable[Path]) -> list[Path]:
    """The scenario files named, or every `*.yaml` in a named directory (sorted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.yaml")))
        elif path.exists():
            files.append(path)
        else:
            raise UserInputError(f"{path}: no such scenario file or directory")
    if not files:
        raise UserInputError(f"no scenario files in {', '.join(str(p) for p in paths)}")
    return files


def load_scenarios(files: Sequence[Path]) -> list[Scenario]:
    """Validate every file before running any. Errors name the file and the field."""
    scenarios = []
    for path in files:
        scenario = load_scenario(path)  # ScenarioError names the file and the field
        if scenario.expect is None:
            raise UserInputError(f"{path}: field 'expect': required by eval (the ground truth)")
        named = scenario.expect.finding
        if named is not None and named not in MECHANISMS:
            known = ", ".join(sorted(MECHANISMS))
            raise UserInputError(
                f"{path}: field 'expect.finding': unknown mechanism '{named}' (known: {known})"
            )
        scenarios.append(scenario)
    return scenarios


def evaluate(paths: Iterable[Path], *, settings: Settings) -> list[ScenarioResult]:
    """Run every scenario found under `paths` and score it against its `expect` block."""
    from bot.diagnosis.logs import load_log_catalog

    scenarios = load_scenarios(scenario_files(paths))
    catalogs = load_catalogs(settings)
    log_catalog = load_log_catalog(LOG_SIGNATURES_FILE)
    results = []
    eval_settings = isolated(settings)
    for scenario in scenarios:
        blind = scenario.model_copy(update={"expect": None})
        with open_runtime(
            eval_settings, scenario=blind, fresh=True, catalogs=catalogs, log_catalog=log_catalog
        ) as rt:
            results.append(_run_one(rt, scenario))
    return results


def isolated(settings: Settings) -> Settings:
    """The caller's settings with a throw-away in-memory database (and so an in-memory
    checkpointer), a policy that never auto-approves (every proposal waits for a human, so
    the run stops at its approval) in dry-run, and leases no heartbeat needs to extend."""
    storage = settings.storage.model_copy(update={"url": "sqlite://"})
    policy = settings.policy.model_copy(update={"auto_approve_risks": [], "dry_run": True})
    # One process owns the in-memory database: no other worker can take a lease over, and a
    # heartbeat thread writing on its single connection mid-run (a run slower than the
    # heartbeat, on a loaded machine) collides with the run's own transaction.
    work = settings.work.model_copy(
        update={"lease_seconds": 86_400.0, "heartbeat_seconds": 3_600.0}
    )
    # Scenarios are simulated by definition: both ports are the simulator, whatever the
    # caller's settings point at (a real cluster is never touched by an evaluation).
    ports = {"cluster": "sim", "telemetry": "sim"}
    update = {"storage": storage, "policy": policy, "work": work, **ports}
    return settings.model_copy(update=update)


def _run_one(rt: Runtime, scenario: Scenario) -> ScenarioResult:
    telemetry = rt.deps.telemetry
    before = telemetry.queries if isinstance(telemetry, SimTelemetry) else 0
    clock = _Stopwatch()
    try:
        triggered = trigger(rt, scenario, on_step=clock.on_step)
    except (OncallError, IntegrationError) as exc:
        triggered = Triggered(runbook=None, error=str(exc))
    queries = (telemetry.queries if isinstance(telemetry, SimTelemetry) else 0) - before
    run_ms = (time.perf_counter() - clock.started) * 1000.0
    assert scenario.expect is not None
    return score(
        scenario.name,
        scenario.expect,
        runbook=triggered.runbook,
        outcome=triggered.outcome,
        error=triggered.error,
        queries=queries,
        diagnosis_ms=clock.elapsed_ms,
        run_ms=run_ms,
        destructive=frozenset(n for n in rt.deps.actions if rt.deps.actions.get(n).destructive),
    )


class _Stopwatch:
    """Time from the trigger to the verdict (the localize step's output)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.elapsed_ms: float | None = None

    def on_step(self, step_id: str, output: Mapping[str, Any]) -> None:
        if output.get("kind") == "localize" and self.elapsed_ms is None:
            self.elapsed_ms = (time.perf_counter() - self.started) * 1000.0


def trigger(rt: Runtime, scenario: Scenario, *, on_step: Any = None) -> Triggered:
    """Start the runbook the scenario's trigger selects, the way production would."""
    given = scenario.trigger
    if given.alert is not None:
        return _alerts(rt, given.alert.alertname, [given.alert.labels], on_step)
    if given.storm is not None:
        return _alerts(rt, given.storm.alertname, given.storm.alert_labels(), on_step)
    return _command(rt, given.command or "", on_step)


def _alerts(
    rt: Runtime, alertname: str, label_sets: Sequence[Mapping[str, str]], on_step: Any
) -> Triggered:
    """One webhook with an alert per label set, received with the configured storm policy;
    the run it starts (one per incident opened; a storm opens one)."""
    now = rt.clock.now()
    body = alert_webhook(alertname, label_sets, starts_at=now.isoformat())
    with session_scope(rt.db) as session:
        received = receive_webhook(
            session,
            parse_webhook(body),
            routes=rt.catalog.alert_routes(),
            at=now,
            storms=StormPolicy.from_settings(rt.settings.intake),
        )
    starting = [r for r in received if r.start_run]
    if not starting or starting[0].runbook is None or starting[0].incident_id is None:
        reason = received[0].unroutable or "the alert did not start a run"
        return Triggered(runbook=received[0].runbook, error=str(reason))
    if len(starting) > 1:
        refs = ", ".join(f"INC-{r.incident_id}" for r in starting)
        return Triggered(
            runbook=starting[0].runbook,
            error=f"{len(received)} alerts opened {len(starting)} incidents ({refs}), not one",
        )
    first = starting[0]
    assert first.runbook is not None and first.incident_id is not None
    loaded = rt.catalog.get(first.runbook)
    inputs = first.run_inputs(loaded.runbook.inputs)
    if inputs is None:
        return Triggered(runbook=loaded.name, error=f"runbook '{loaded.name}' takes no `nodes`")
    outcome = rt.engine.start(
        loaded,
        inputs=inputs,
        incident_id=first.incident_id,
        requester="alertmanager",
        on_step=on_step,
    )
    return Triggered(runbook=loaded.name, outcome=outcome)


def _command(rt: Runtime, text: str, on_step: Any) -> Triggered:
    runbook, inputs = parse_command(text, rt)
    loaded = rt.catalog.get(runbook)
    incident_id, _ = rt.engine.open_incident(loaded, inputs, actor=EVAL_REQUESTER)
    outcome = rt.engine.start(
        loaded,
        inputs=inputs,
        incident_id=incident_id,
        requester=EVAL_REQUESTER,
        on_step=on_step,
    )
    return Triggered(runbook=loaded.name, outcome=outcome)


def parse_command(text: str, rt: Runtime) -> tuple[str, dict[str, str]]:
    """`/gpu` text -> (runbook, inputs), through the same grammar Slack uses
    (`bot.intake.commands`): `diagnose NODE`, `run NAME key=value...`, or a runbook's own verb
    (`nccl llm-pretrain`). Other commands (incidents, mttr, ...) start no run: refused."""
    catalog = rt.catalog
    syntax = [
        grammar.RunbookSyntax(
            name=loaded.name,
            target_input=loaded.runbook.target_input,
            node_inputs=frozenset(n for n, s in loaded.runbook.inputs.items() if s.type == "node"),
            verbs=tuple(v for v in loaded.runbook.triggers.commands if v not in grammar.VERBS),
        )
        for loaded in catalog.runbooks.values()
    ]
    command = grammar.parse_command(text, runbooks=syntax)
    if isinstance(command, grammar.Diagnose):
        loaded = catalog.for_command("diagnose") or catalog.get("node-diagnose")
        return loaded.name, {loaded.runbook.target_input or "node": command.node}
    if isinstance(command, grammar.RunRunbook):
        return command.runbook, dict(command.inputs)
    raise UserInputError(f"'{text}' starts no runbook (use diagnose, run or a runbook's verb)")


def alert_webhook(
    alertname: str, label_sets: Sequence[Mapping[str, str]], *, starts_at: str
) -> dict[str, Any]:
    """An Alertmanager v4 webhook body with one firing alert per label set (what Alertmanager,
    grouping by alert name, would post)."""
    alerts: list[dict[str, Any]] = []
    for labels in label_sets:
        full = {"alertname": alertname, **labels}
        full.setdefault("severity", "critical")
        alerts.append(
            {
                "status": "firing",
                "labels": full,
                "annotations": {"summary": f"{alertname} firing"},
                "startsAt": starts_at,
                "endsAt": "0001-01-01T00:00:00Z",
            }
        )
    first: dict[str, str] = alerts[0]["labels"]
    common = {k: v for k, v in first.items() if all(a["labels"].get(k) == v for a in alerts)}
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{alertname}"}}',
        "status": "firing",
        "receiver": "gpu-oncall",
        "groupLabels": {"alertname": alertname},
        "commonLabels": common,
        "alerts": alerts,
    }

"""Load runbook YAML files: parse, validate, compile expressions and templates, find the data
dependencies between steps. Every error names the file, the step id and the field.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bot.diagnosis.layers import Layer
from bot.engine.expressions import Expression, ExpressionError, compile_expression
from bot.engine.schema import CorrelateSpec, Runbook, Step, StepKind
from bot.engine.templates import MessageTemplate, TemplateRenderError, compile_template
from bot.errors import RunbookError

YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (~10x faster than the pure-Python one,
the same documents accepted), else the pure-Python one."""

#: Names every expression and template may use besides inputs and step ids.
BUILTIN_NAMES = frozenset({"target", "run_id", "runbook"})

#: What a check's `culprit` may render: one culprit's fields, `nodes` (a finding about many
#: nodes) and `gpus` / `hcas` (`node:device` tokens: each node's own device).
CULPRIT_FIELDS = frozenset(
    {"node", "nodes", "gpu", "gpus", "hca", "hcas", "pod", "workload", "uuid"}
)

#: What a verify step's `expect` reads of its fresh reading (steps/gather.summarize_signal).
VERIFY_SUMMARY_NAMES = frozenset(
    {
        "value", "signal", "nodes", "window", "count", "max", "min", "sum", "median", "any",
        "argmax", "argmin", "over_zero", "over_zero_nodes", "zero_nodes", "present_nodes",
        "sparse_nodes", "gone", "samples", "missing", "missing_nodes", "queries", "low_outliers",
        "low_outlier_nodes", "high_outliers", "high_outlier_nodes", "distinct", "majority",
        "minority_nodes", "node_labels", "bit_nodes", "error",
    }
)

#: Step kinds that wait for every step of the previous stage, in flow order.
_STAGE_AFTER: dict[StepKind, tuple[StepKind, ...]] = {
    StepKind.LOCALIZE: (StepKind.CHECK,),
    StepKind.PROPOSE: (StepKind.LOCALIZE,),
    StepKind.APPROVE: (StepKind.PROPOSE,),
    StepKind.ACT: (StepKind.APPROVE, StepKind.PROPOSE),
    StepKind.VERIFY: (StepKind.ACT,),
}


@dataclass(frozen=True)
class LoadedRunbook:
    """A validated runbook with its compiled expressions/templates and step dependencies."""

    runbook: Runbook
    file: str
    expressions: Mapping[tuple[str, str], Expression] = field(default_factory=dict)
    templates: Mapping[tuple[str, str], MessageTemplate] = field(default_factory=dict)
    deps: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.runbook.name

    @cached_property
    def kinds(self) -> Mapping[str, StepKind]:
        """Each step's kind, by step id (worked out once: the engine asks per super-step)."""
        return {step.id: step.kind for step in self.runbook.steps}

    @cached_property
    def depths(self) -> Mapping[str, int]:
        """Each step's super-step: 1 for a step with no dependency, else 1 + its deepest
        one's (worked out once)."""
        depth: dict[str, int] = {}
        for step in self.runbook.steps:  # dependencies come first (checked at load)
            depth[step.id] = 1 + max((depth[d] for d in self.deps[step.id]), default=0)
        return depth

    def expression(self, step_id: str, name: str) -> Expression:
        return self.expressions[(step_id, name)]

    def template(self, step_id: str, name: str) -> MessageTemplate:
        return self.templates[(step_id, name)]


def load_runbook_file(
    path: Path, *, signals: Collection[str], actions: Collection[str]
) -> LoadedRunbook:
    """Read one runbook file. Raises RunbookError naming file, step and field."""
    file = str(path)
    try:
        raw = yaml.load(path.read_text(), Loader=YAML_LOADER)  # noqa: S506 (a safe loader)
    except OSError as exc:
        raise RunbookError(f"cannot read: {exc.strerror}", file=file) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise RunbookError(
            f"{where}not valid YAML ({getattr(exc, 'problem', exc)})", file=file
        ) from exc
    return parse_runbook(raw, file=file, signals=signals, actions=actions)


def parse_runbook(
    raw: Any, *, file: str, signals: Collection[str], actions: Collection[str]
) -> LoadedRunbook:
    """Validate an already-parsed YAML document as a runbook."""
    if not isinstance(raw, dict):
        raise RunbookError("a runbook must be a YAML mapping", file=file)
    try:
        runbook = Runbook.model_validate(raw)
    except ValidationError as exc:
        raise _schema_error(exc, raw, file) from exc
    return _Linker(runbook, file, signals=signals, actions=actions).link()


def _schema_error(exc: ValidationError, raw: dict[str, Any], file: str) -> RunbookError:
    first = exc.errors()[0]
    loc = [str(p) for p in first["loc"]]
    message = first["msg"].removeprefix("Value error, ")
    if len(loc) >= 2 and loc[0] == "steps" and loc[1].isdigit():
        steps = raw.get("steps") or []
        index = int(loc[1])
        step = steps[index] if index < len(steps) and isinstance(steps[index], dict) else {}
        step_id = str(step.get("id", f"#{index + 1}"))
        return RunbookError(message, file=file, step=step_id, field=".".join(loc[2:]) or None)
    return RunbookError(message, file=file, field=".".join(loc) or None)


class _Linker:
    """Checks cross-references and compiles every expression and template of one runbook."""

    def __init__(
        self, runbook: Runbook, file: str, *, signals: Collection[str], actions: Collection[str]
    ) -> None:
        self.runbook, self.file = runbook, file
        self.signals, self.actions = signals, actions
        self.step_ids = [s.id for s in runbook.steps]
        self.expressions: dict[tuple[str, str], Expression] = {}
        self.templates: dict[tuple[str, str], MessageTemplate] = {}
        self.reads: dict[str, set[str]] = {s.id: set() for s in runbook.steps}

    def error(
        self, message: str, step: Step | None = None, field: str | None = None
    ) -> RunbookError:
        return RunbookError(message, file=self.file, step=step.id if step else None, field=field)

    def link(self) -> LoadedRunbook:
        self._check_ids()
        self._check_storms()
        self._check_policy()
        for step in self.runbook.steps:
            self._link_step(step)
        deps = self._dependencies()
        self._check_cycles(deps)
        self._check_unused()
        return LoadedRunbook(
            runbook=self.runbook,
            file=self.file,
            expressions=self.expressions,
            templates=self.templates,
            deps=deps,
        )

    def _check_ids(self) -> None:
        seen: set[str] = set()
        for step in self.runbook.steps:
            if step.id in seen:
                raise self.error("duplicate step id", step, "id")
            if step.id in self.runbook.inputs or step.id in BUILTIN_NAMES:
                raise self.error("step id clashes with an input or built-in name", step, "id")
            seen.add(step.id)

    def _check_storms(self) -> None:
        """A runbook that triages storms gets the members as its `nodes` input."""
        if not self.runbook.triggers.storms:
            return
        spec = self.runbook.inputs.get("nodes")
        if spec is None or spec.type != "nodes":
            raise self.error(
                "a runbook with 'triggers.storms' needs an input 'nodes' of type nodes "
                "(the storm's member nodes)",
                field="triggers.storms",
            )

    def _check_policy(self) -> None:
        """`policy.auto_approve` names known actions, each once."""
        rules = self.runbook.policy.auto_approve if self.runbook.policy else None
        seen: set[str] = set()
        for index, rule in enumerate(rules or []):
            where = f"policy.auto_approve.{index}.action"
            if rule.action not in self.actions:
                valid = ", ".join(sorted(self.actions))
                raise self.error(f"unknown action '{rule.action}' (actions: {valid})", field=where)
            if rule.action in seen:
                raise self.error(f"action '{rule.action}' has two auto-approve rules", field=where)
            seen.add(rule.action)

    def _known_names(self) -> set[str]:
        return set(self.step_ids) | set(self.runbook.inputs) | BUILTIN_NAMES

    def _reference_check(self, step: Step, field: str, names: frozenset[str]) -> None:
        known = self._known_names()
        for name in sorted(names):
            if name not in known:
                hint = difflib.get_close_matches(name, self.step_ids, n=1)
                suggestion = f"; did you mean '{hint[0]}'?" if hint else ""
                raise self.error(
                    f"unknown step '{name}' (steps: {', '.join(self.step_ids)}){suggestion}",
                    step,
                    field,
                )
            if name == step.id:
                raise self.error("a step cannot read its own output", step, field)
            if name in self.step_ids:
                self.reads[step.id].add(name)

    def _expr(self, step: Step, field: str, source: str) -> None:
        try:
            expression = compile_expression(source)
        except ExpressionError as exc:
            raise self.error(f"bad expression {exc}", step, field) from exc
        self._reference_check(step, field, expression.variables)
        self.expressions[(step.id, field)] = expression

    def _tmpl(self, step: Step, field: str, source: str) -> None:
        try:
            template = compile_template(source)
        except TemplateRenderError as exc:
            raise self.error(f"bad template {exc}", step, field) from exc
        self._reference_check(step, field, template.variables)
        self.templates[(step.id, field)] = template

    def _signal(self, step: Step, field: str, name: str) -> None:
        if name not in self.signals:
            hint = difflib.get_close_matches(name, list(self.signals), n=3)
            suggestion = f" (did you mean: {', '.join(hint)})" if hint else ""
            raise self.error(f"unknown signal '{name}'{suggestion}", step, field)

    def _link_step(self, step: Step) -> None:
        for key, value in step.with_.items():
            self._tmpl(step, f"with.{key}", value)
        for after in step.after:
            if after not in self.step_ids:
                raise self.error(
                    f"unknown step '{after}' (steps: {', '.join(self.step_ids)})", step, "after"
                )
            self.reads[step.id].add(after)
        kind = step.kind
        if kind is StepKind.SIGNAL and step.signal is not None:
            self._signal(step, "signal", step.signal)
        elif kind is StepKind.CHECK and step.check is not None:
            self._link_check(step, step.check)
        elif kind is StepKind.PROPOSE and step.propose is not None:
            self._link_propose(step)
        elif kind is StepKind.LOCALIZE and step.localize and step.localize.correlate:
            self._link_correlate(step, step.localize.correlate)
        elif kind is StepKind.VERIFY and step.verify is not None:
            self._signal(step, "verify.signal", step.verify.signal)
            try:
                expect = compile_expression(step.verify.expect)
            except ExpressionError as exc:
                raise self.error(f"bad expression {exc}", step, "verify.expect") from exc
            self._verify_reads(step, expect)
            self.expressions[(step.id, "verify.expect")] = expect
            if step.verify.when is not None:
                self._expr(step, "verify.when", step.verify.when)

    def _verify_reads(self, step: Step, expect: Expression) -> None:
        """`verify.expect` reads the fresh reading's summary, inputs and earlier steps; any
        other name is a typo, caught here rather than read as "verification failed"."""
        summary = VERIFY_SUMMARY_NAMES - set(self.step_ids) - set(self.runbook.inputs)
        steps = frozenset(n for n in expect.variables if n not in summary)
        try:
            self._reference_check(step, "verify.expect", steps)
        except RunbookError as exc:
            raise self.error(
                f"{exc.detail}; a verification reads {', '.join(sorted(summary))}, the inputs "
                "and earlier steps",
                step,
                "verify.expect",
            ) from exc

    def _link_check(self, step: Step, source: str) -> None:
        if step.layer not in {layer.value for layer in Layer} - {Layer.NONE.value}:
            valid = ", ".join(layer.value for layer in Layer if layer is not Layer.NONE)
            raise self.error(f"unknown layer '{step.layer}' (layers: {valid})", step, "layer")
        self._expr(step, "check", source)
        if step.finding is not None:
            self._tmpl(step, "finding", step.finding)
        for key, value in step.culprit.items():
            if key not in CULPRIT_FIELDS:
                raise self.error(
                    f"unknown culprit field '{key}' "
                    "(node, nodes, gpu, gpus, hca, hcas, pod, workload, uuid)",
                    step,
                    f"culprit.{key}",
                )
            self._tmpl(step, f"culprit.{key}", value)

    def _link_correlate(self, step: Step, spec: CorrelateSpec) -> None:
        field = "localize.correlate"
        self._reference_check(step, f"{field}.sources", frozenset(spec.sources))
        layers = {layer.value for layer in Layer} - {Layer.NONE.value}
        for layer in spec.domains:
            if layer not in layers:
                valid = ", ".join(sorted(layers))
                raise self.error(
                    f"unknown layer '{layer}' (layers: {valid})", step, f"{field}.domains.{layer}"
                )

    def _link_propose(self, step: Step) -> None:
        for index, proposal in enumerate(step.propose or []):
            where = f"propose.{index}"
            if proposal.action not in self.actions:
                valid = ", ".join(sorted(self.actions))
                raise self.error(
                    f"unknown action '{proposal.action}' (actions: {valid})",
                    step,
                    f"{where}.action",
                )
            if proposal.when is not None:
                self._expr(step, f"{where}.when", proposal.when)
            if proposal.target is not None:
                self._tmpl(step, f"{where}.target", proposal.target)
            if proposal.targets is not None:
                self._tmpl(step, f"{where}.targets", proposal.targets)
            for key, value in proposal.params.items():
                if isinstance(value, str):
                    self._tmpl(step, f"{where}.params.{key}", value)

    def _dependencies(self) -> dict[str, frozenset[str]]:
        by_kind: dict[StepKind, list[str]] = {}
        for step in self.runbook.steps:
            by_kind.setdefault(step.kind, []).append(step.id)
        deps: dict[str, frozenset[str]] = {}
        for step in self.runbook.steps:
            implicit = {sid for k in _STAGE_AFTER.get(step.kind, ()) for sid in by_kind.get(k, [])}
            deps[step.id] = frozenset((self.reads[step.id] | implicit) - {step.id})
        return deps

    def _check_cycles(self, deps: Mapping[str, frozenset[str]]) -> None:
        state: dict[str, int] = {}

        def visit(node: str, path: list[str]) -> None:
            if state.get(node) == 2:
                return
            if state.get(node) == 1:
                cycle = " -> ".join([*path[path.index(node) :], node])
                raise self.error(
                    f"steps depend on each other in a cycle: {cycle}",
                    self.runbook.step(node),
                    "after",
                )
            state[node] = 1
            for dep in sorted(deps[node]):
                visit(dep, [*path, node])
            state[node] = 2

        for step_id in self.step_ids:
            visit(step_id, [])

    def _check_unused(self) -> None:
        read = set().union(*self.reads.values()) if self.reads else set()
        for step in self.runbook.steps:
            if step.kind in (StepKind.SIGNAL, StepKind.CLUSTER) and step.id not in read:
                raise self.error(
                    "unreachable: no check, proposal or template reads this step's output",
                    step,
                    step.kind.value,
                )

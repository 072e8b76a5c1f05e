"""Presentation for the CLI: step progress, the verdict, approvals, actions, timeline, MTTR.

Renders step outputs and verdicts as text; knows nothing about storage or the engine's insides.
Colour only when writing to a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

_COLORS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "dim": "2", "bold": "1"}


class Terminal:
    def __init__(self, out: TextIO | None = None, *, color: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.color = self.out.isatty() if color is None else color

    def style(self, text: str, name: str) -> str:
        return f"\033[{_COLORS[name]}m{text}\033[0m" if self.color else text

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def heading(self, text: str) -> None:
        self.line()
        self.line(self.style(f"== {text}", "bold"))

    # -- progress --------------------------------------------------------------------------
    def step(self, step_id: str, output: Mapping[str, Any]) -> None:
        icon, text = describe_step(step_id, output)
        colour = {"!": "red", "+": "green", "?": "yellow"}.get(icon, "dim")
        self.line(f"  [{self.style(icon, colour)}] {step_id:<16} {text}")

    # -- verdict ---------------------------------------------------------------------------
    def verdict(self, verdict: Mapping[str, Any]) -> None:
        for text in render_verdict(verdict):
            self.line(text)

    def proposals(self, proposals: Sequence[Mapping[str, Any]]) -> None:
        if not proposals:
            self.line("  No action proposed.")
            return
        for p in proposals:
            risk = self.style(p["risk"], "red" if p["risk"] == "high" else "yellow")
            reason = f" - {p['reason']}" if p.get("reason") else ""
            self.line(f"  * {p['description']}  [risk {risk}]{reason}")


def describe_step(step_id: str, output: Mapping[str, Any]) -> tuple[str, str]:
    """A one-line description of a completed step and an icon (+ ok, ! finding, ? unknown)."""
    kind = output.get("kind")
    if kind == "signal":
        if output.get("missing"):
            why = output.get("error") or "no series (exporter silent or counter not enabled)"
            return "?", f"{output['signal']}: missing - {why}"
        top = output.get("argmax", {})
        where = " ".join(f"{k}={v}" for k, v in top.items() if k in ("node", "gpu", "device", "port"))
        return ".", f"{output['signal']}: max {_num(output.get('max'))} ({where}) over {output.get('window')}"
    if kind == "cluster":
        return ".", _describe_cluster(output)
    if kind == "check":
        status = output["status"]
        if status == "fired":
            return "!", f"{output['finding']['summary']} [{output['layer']}, {output['finding']['severity']}]"
        if status == "unknown":
            missing = ", ".join(output.get("missing_signals", [])) or output.get("error", "")
            return "?", f"{output['layer']}: cannot tell (missing: {missing})"
        return "+", f"{output['layer']}: ok"
    if kind == "localize":
        culprits = ", ".join(output.get("culprits", [])) or "none"
        return "!" if output["layer"] != "none" else "+", (
            f"verdict: {output['layer']} (confidence {output['confidence']:.0%}), culprits: {culprits}"
        )
    if kind == "propose":
        actions = ", ".join(p["description"] for p in output.get("proposals", [])) or "nothing"
        return ".", f"proposed: {actions}"
    if kind == "approve":
        return ".", f"approval: {output.get('decision')} by {output.get('actor')}"
    if kind == "act":
        if output.get("skipped"):
            return "?", f"actions skipped ({output.get('reason')})"
        return "+" if output.get("succeeded") else "!", "; ".join(r["detail"] for r in output.get("results", []))
    if kind == "verify":
        status = output.get("status")
        if status == "skipped":
            return ".", f"verification skipped: {output.get('reason')}"
        icon = "+" if status == "passed" else "!"
        return icon, (
            f"verification {status}: {output.get('signal')} = {_num(output.get('value'))} "
            f"after {output.get('polls')} poll(s)"
        )
    return ".", str(kind)


def _describe_cluster(output: Mapping[str, Any]) -> str:
    read = output.get("read")
    if read == "node":
        cond = "Ready" if output.get("ready") else "NotReady"
        cordon = ", cordoned" if output.get("unschedulable") else ""
        return f"node {output.get('name')}: {cond}{cordon}, GPUs {output.get('gpu_allocatable')}/{output.get('gpu_capacity')} allocatable"
    if read in ("node_logs", "pod_logs"):
        xids = output.get("xids") or []
        found = f"{output.get('match_count', 0)} signature match(es)"
        if xids:
            found += f", XIDs {', '.join(str(x) for x in xids)}"
        return f"{read}: {output.get('lines', 0)} lines, {found}"
    if read == "pods":
        return f"pods: {output.get('count')} ({output.get('running')} running, {output.get('pending')} pending)"
    return f"events: {output.get('count')} ({output.get('warnings')} warnings)"


def render_verdict(verdict: Mapping[str, Any]) -> list[str]:
    """The diagnosis as lines: layer, confidence, culprits, evidence, ruled out, missing."""
    lines = [
        f"  Layer:       {verdict.get('layer')} (confidence {verdict.get('confidence', 0):.0%})",
        f"  Culprit:     {_culprits(verdict)}",
        f"  Summary:     {verdict.get('summary', '')}",
    ]
    findings = verdict.get("findings", [])
    if findings:
        lines.append("  Evidence:")
        for finding in findings[:8]:
            lines.append(f"    - [{finding['severity']}/{finding['layer']}] {finding['summary']}")
            for ev in finding.get("evidence", [])[:3]:
                labels = " ".join(f"{k}={v}" for k, v in ev.get("labels", {}).items() if k != "node")
                lines.append(f"        {ev['what']} = {_num(ev.get('value'))} {labels}".rstrip())
    ruled = ", ".join(verdict.get("ruled_out", [])) or "none"
    missing = ", ".join(verdict.get("missing_signals", [])) or "none"
    lines.append(f"  Ruled out:   {ruled}")
    lines.append(f"  Missing:     {missing}")
    return lines


def _culprits(verdict: Mapping[str, Any]) -> str:
    details = verdict.get("culprit_details", [])
    if not details:
        return ", ".join(verdict.get("culprits", [])) or "none"
    parts = []
    for c in details:
        text = c.get("node") or c.get("workload") or "?"
        if c.get("gpu") is not None:
            text += f" GPU {c['gpu']}"
        if c.get("uuid"):
            text += f" ({c['uuid']})"
        if c.get("hca"):
            text += f" HCA {c['hca']}"
        parts.append(text)
    return "; ".join(parts)


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.3g}"
    return str(value)

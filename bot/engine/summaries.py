"""One-line descriptions of completed steps, shared by the timeline and the presentations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def describe_step(step_id: str, output: Mapping[str, Any]) -> tuple[str, str]:
    """A one-line description of a completed step and an icon (+ ok, ! finding, ? unknown)."""
    kind = output.get("kind")
    if kind == "signal":
        if output.get("missing"):
            why = output.get("error") or "no series (exporter silent or counter not enabled)"
            return "?", f"{output['signal']}: missing - {why}"
        top = output.get("argmax", {})
        where = " ".join(
            f"{k}={v}" for k, v in top.items() if k in ("node", "gpu", "device", "port")
        )
        return (
            ".",
            f"{output['signal']}: max {format_number(output.get('max'))} ({where}) "
            f"over {output.get('window')}",
        )
    if kind == "cluster":
        return ".", _describe_cluster(output)
    if kind == "check":
        status = output["status"]
        if status == "fired":
            return (
                "!",
                f"{output['finding']['summary']} "
                f"[{output['layer']}, {output['finding']['severity']}]",
            )
        if status == "unknown":
            missing = ", ".join(output.get("missing_signals", [])) or output.get("error", "")
            return "?", f"{output['layer']}: cannot tell (missing: {missing})"
        return "+", f"{output['layer']}: ok"
    if kind == "localize":
        culprits = ", ".join(output.get("culprits", [])) or "none"
        return "!" if output["layer"] != "none" else "+", (
            f"verdict: {output['layer']} (confidence {output['confidence']:.0%}), "
            f"culprits: {culprits}"
        )
    if kind == "propose":
        actions = ", ".join(p["description"] for p in output.get("proposals", [])) or "nothing"
        withheld = "; ".join(
            f"not {w['action']} {w['target']}: {w['reason']}" for w in output.get("withheld", [])
        )
        return ".", f"proposed: {actions}" + (f" ({withheld})" if withheld else "")
    if kind == "approve":
        return ".", f"approval: {output.get('decision')} by {output.get('actor')}"
    if kind == "act":
        if output.get("skipped"):
            return "?", f"actions skipped ({output.get('reason')})"
        return "+" if output.get("succeeded") else "!", "; ".join(
            r["detail"] for r in output.get("results", [])
        )
    if kind == "verify":
        status = output.get("status")
        if status == "skipped":
            return ".", f"verification skipped: {output.get('reason')}"
        icon = "+" if status == "passed" else "!"
        return icon, (
            f"verification {status}: {output.get('signal')} = {format_number(output.get('value'))} "
            f"after {output.get('polls')} poll(s)"
        )
    return ".", str(kind)


def _describe_cluster(output: Mapping[str, Any]) -> str:
    read = output.get("read")
    if read == "node":
        cond = "Ready" if output.get("ready") else "NotReady"
        cordon = ", cordoned" if output.get("unschedulable") else ""
        gpus = f"{output.get('gpu_allocatable')}/{output.get('gpu_capacity')}"
        return f"node {output.get('name')}: {cond}{cordon}, GPUs {gpus} allocatable"
    if read in ("node_logs", "pod_logs"):
        xids = output.get("xids") or []
        found = f"{output.get('match_count', 0)} signature match(es)"
        if xids:
            found += f", XIDs {', '.join(str(x) for x in xids)}"
        return f"{read}: {output.get('lines', 0)} lines, {found}"
    if read == "pods":
        running, pending = output.get("running"), output.get("pending")
        return f"pods: {output.get('count')} ({running} running, {pending} pending)"
    return f"events: {output.get('count')} ({output.get('warnings')} warnings)"


def format_number(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.3g}"
    return str(value)

"""Presentation for the CLI: step progress, the verdict, approvals, actions, timeline, MTTR.

Renders step outputs and verdicts as text; knows nothing about storage or the engine's insides.
Colour only when writing to a terminal. The terminal is a client of the run, never its owner: when
the reader goes away (`gpu-oncall diagnose ... | head -3`), printing stops and the run goes on.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from bot.diagnosis.units import format_reading
from bot.engine.summaries import describe_step

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without C0/C1 control characters (tab and newline kept): untrusted text (alert
    labels, log lines) must not move the cursor, retitle the window or recolour the terminal."""
    return _CONTROLS.sub("\uFFFD", text)


_COLORS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "dim": "2", "bold": "1"}


class Terminal:
    """Writes lines to `out` (standard output by default).

    A closed reader (EPIPE) sets `closed` and turns every later write into a no-op, so a
    command keeps running to its end state; `release` then detaches standard output so the
    interpreter's last flush at exit cannot fail either.
    """

    def __init__(self, out: TextIO | None = None, *, color: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.color = self.out.isatty() if color is None else color
        self.closed = False

    def style(self, text: str, name: str) -> str:
        return f"\033[{_COLORS[name]}m{text}\033[0m" if self.color else text

    def plain(self, text: str = "") -> None:
        """A line of untrusted text, its control characters replaced (see `printable`)."""
        self.line(printable(text))

    def line(self, text: str = "") -> None:
        if self.closed:
            return
        try:
            print(text, file=self.out, flush=True)
        except BrokenPipeError:  # EPIPE: the reader closed its end
            self.closed = True

    def release(self) -> None:
        """After a closed reader: point standard output at /dev/null, so that Python's flush
        at exit does not print "Exception ignored ... BrokenPipeError" (Python docs, SIGPIPE)."""
        if not self.closed or self.out is not sys.stdout:
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)

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
                labels = " ".join(
                    f"{k}={v}" for k, v in ev.get("labels", {}).items() if k != "node"
                )
                reading = format_reading(
                    ev.get("value"),
                    unit=str(ev.get("unit", "")),
                    peer_median=ev.get("peer_median"),
                    peers=int(ev.get("peers", 0)),
                )
                lines.append(f"        {ev['what']} = {reading} {labels}".rstrip())
    ruled = ", ".join(verdict.get("ruled_out", [])) or "none"
    missing = ", ".join(verdict.get("missing_signals", [])) or "none"
    lines.append(f"  Ruled out:   {ruled}")
    if verdict.get("unknown_layers"):
        lines.append(f"  Not checked: {', '.join(verdict['unknown_layers'])} (signals missing)")
    lines.append(f"  Missing:     {missing}")
    for note in verdict.get("detectors", []):
        lines.append(f"  Detector:    {note}")
    return lines


def _culprits(verdict: Mapping[str, Any]) -> str:
    details = verdict.get("culprit_details", [])
    if not details:
        return ", ".join(verdict.get("culprits", [])) or "none"
    parts = []
    for c in details:
        text = c.get("node") or c.get("workload") or c.get("pod") or c.get("domain") or "?"
        if c.get("domain") and not c.get("node"):
            text += f" (shared {c.get('domain_label', 'domain')})"
        if c.get("gpu") is not None:
            text += f" GPU {c['gpu']}"
        if c.get("uuid"):
            text += f" ({c['uuid']})"
        if c.get("hca"):
            text += f" HCA {c['hca']}"
        parts.append(text)
    return "; ".join(parts)

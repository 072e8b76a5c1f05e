"""The commands that run the simulated fleet by definition: `gpu-oncall eval` (score scenario
files) and `sim serve` (a scenario's exporter metrics for a real Prometheus)."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli.terminal import Terminal
from bot.config import Settings
from bot.errors import UserInputError


def evaluate(settings: Settings, term: Terminal, *, paths: list[Path], as_json: bool) -> int:
    """`gpu-oncall eval`: score scenario files; exit 0 even when some diagnoses are wrong."""
    from bot.evaluation.evaluating import evaluate as run_eval
    from bot.evaluation.scoring import render_json, render_table

    results = run_eval(paths, settings=settings)
    if as_json:
        term.line(json.dumps(render_json(results), indent=2))
    else:
        for line in render_table(results):
            term.line(line)
    return 0

def sim_serve(term: Terminal, *, scenario: Path, host: str, port: int) -> int:
    """`gpu-oncall sim serve`: a scenario's exporter metrics over HTTP until interrupted.

    The fleet runs on the wall clock from now (its t0), so faults play out in real time and
    Prometheus sees them evolve. Exit 0 on Ctrl-C; 2 if the scenario or the port is bad.
    """
    from bot.clock import SystemClock
    from bot.wiring.simulation import (
        ExporterApp,
        ExporterServer,
        Fleet,
        exporter_families,
        load_scenario_file,
    )

    loaded = load_scenario_file(scenario)
    fleet = Fleet.from_scenario(loaded, now=SystemClock().now)
    try:
        server = ExporterServer(ExporterApp(fleet), host=host, port=port)
    except OSError as exc:
        raise UserInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    nodes, started = len(fleet.node_names), f"{fleet.t0:%H:%M:%S}"
    term.line(f"Scenario '{loaded.name}': {nodes} simulated nodes, t0 {started} UTC")
    term.line(f"Serving {server.url}")
    for family in exporter_families(fleet):
        term.line(f"  {family:<20} {server.url}/{family}")
    term.line("Ctrl-C to stop.")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        term.line("Stopped.")
    finally:
        server.close()
    return 0

"""The `gpu-oncall` command line: a boundary. Reads Settings once, opens the runtime, renders
results with bot.terminal, and turns errors into one-line messages and exit codes
(2 = bad input, 1 = unexpected failure with a reference id; the traceback goes to the log).
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot import commands
from bot.config import Settings
from bot.errors import OncallError, UserInputError
from bot.terminal import Terminal
from integrations.errors import IntegrationError

logger = logging.getLogger("gpu_oncall")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-oncall", description="GPU-cluster incident response bot"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo", help="run the ECC-storm journey end to end on the simulated fleet"
    )
    demo.add_argument(
        "--yes", action="store_true", help="approve the proposed actions without asking"
    )
    demo.add_argument(
        "--scenario", type=Path, help="scenario file (default: the shipped ECC storm)"
    )

    diagnose = sub.add_parser(
        "diagnose", help="diagnose one node across every layer (node-diagnose)"
    )
    diagnose.add_argument("node")
    _run_options(diagnose)

    run = sub.add_parser("run", help="run a runbook: gpu-oncall run ecc-storm node=gpu-node-03")
    run.add_argument("runbook")
    run.add_argument("inputs", nargs="*", metavar="KEY=VALUE")
    _run_options(run)

    incidents = sub.add_parser("incidents", help="list incidents")
    incidents.add_argument("--all", action="store_true", help="include resolved incidents")
    incidents.add_argument("--json", action="store_true")

    alerts = sub.add_parser("alerts", help="list received Alertmanager alerts")
    alerts.add_argument(
        "--unrouted", action="store_true", help="only alerts no runbook took, with the reason"
    )
    alerts.add_argument("--limit", type=int, default=50)
    alerts.add_argument("--json", action="store_true")

    serve = sub.add_parser(
        "serve", help="HTTP server: Alertmanager webhook, /healthz, /readyz, /metrics"
    )
    serve.add_argument("--host", help="listen address (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: server.port, 8080)")
    serve.add_argument("--scenario", type=Path, help="scenario file for the simulated fleet")
    serve.add_argument(
        "--socket-mode",
        action="store_true",
        help="receive Slack over Socket Mode (no public ingress; needs slack.app_token)",
    )

    for verb in ("approve", "reject"):
        decide = sub.add_parser(verb, help=f"{verb} the pending approval of a run or incident")
        decide.add_argument("ref", metavar="RUN_OR_INCIDENT")
        decide.add_argument("--as", dest="actor", help="who decides (default: cli:$USER)")
        decide.add_argument("--reason", default="")
        decide.add_argument("--scenario", type=Path, help=argparse.SUPPRESS)
        decide.add_argument("--json", action="store_true")

    postmortem = sub.add_parser("postmortem", help="export an incident's timeline and MTTR")
    postmortem.add_argument("incident")
    postmortem.add_argument("--format", choices=["md", "json"], default="md")
    postmortem.add_argument("--pinned", action="store_true", help="only pinned timeline events")

    evaluate = sub.add_parser(
        "eval", help="run scenario files through their triggers and score the diagnoses"
    )
    evaluate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    evaluate.add_argument("--json", action="store_true", help="print the scores as JSON")

    classify = sub.add_parser("classify-log", help="classify a log (XID, NCCL, CUDA, OOM lines)")
    classify.add_argument("file", help="a log file, or - for standard input")
    classify.add_argument("--json", action="store_true")

    books = sub.add_parser("runbooks", help="list, validate or graph runbooks")
    books_sub = books.add_subparsers(dest="runbooks_command", required=True, metavar="ACTION")
    validate = books_sub.add_parser(
        "validate", help="lint runbooks (default: shipped + configured)"
    )
    validate.add_argument("paths", nargs="*", type=Path)
    books_sub.add_parser("list", help="list runbooks with their triggers")
    graph = books_sub.add_parser("graph", help="print a runbook's step graph as Mermaid")
    graph.add_argument("name")

    sim = sub.add_parser("sim", help="the simulated fleet's endpoints for a real Prometheus")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True, metavar="ACTION")
    serve_sim = sim_sub.add_parser(
        "serve", help="serve a scenario's exporter metrics (/metrics) for Prometheus to scrape"
    )
    serve_sim.add_argument("--scenario", type=Path, required=True, help="scenario file")
    serve_sim.add_argument("--port", type=int, default=9400, help="0 picks a free port")
    serve_sim.add_argument("--host", default="127.0.0.1")
    return parser


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", type=Path, help="scenario file for the simulated fleet")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument(
        "--yes", action="store_true", help="approve proposed actions without asking"
    )


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    term = Terminal()
    try:
        settings = Settings()
        return dispatch(args, settings, term)
    except (UserInputError, IntegrationError) as exc:
        _err(f"gpu-oncall: error: {exc}")
        return 2
    except OncallError as exc:
        _err(f"gpu-oncall: {exc}")
        return 1
    except KeyboardInterrupt:
        _err("gpu-oncall: interrupted")
        return 130
    except Exception:  # boundary: log the traceback, show a reference
        ref = uuid.uuid4().hex[:6]
        logger.exception("unexpected error (ref %s)", ref)
        _err(f"gpu-oncall: unexpected error (ref {ref}); the log has details")
        return 1


def dispatch(args: argparse.Namespace, settings: Settings, term: Terminal) -> int:
    user = f"cli:{getpass.getuser()}"
    if args.command == "demo":
        return commands.demo(settings, term, scenario=args.scenario, yes=args.yes, user=user)
    if args.command == "diagnose":
        return commands.run_runbook(
            settings,
            term,
            runbook="node-diagnose",
            inputs={"node": args.node},
            scenario=args.scenario,
            as_json=args.json,
            yes=args.yes,
            user=user,
        )
    if args.command == "run":
        return commands.run_runbook(
            settings,
            term,
            runbook=args.runbook,
            inputs=parse_pairs(args.inputs),
            scenario=args.scenario,
            as_json=args.json,
            yes=args.yes,
            user=user,
        )
    if args.command == "incidents":
        return commands.list_incidents(settings, term, include_resolved=args.all, as_json=args.json)
    if args.command == "alerts":
        return commands.list_alerts(
            settings, term, unrouted=args.unrouted, limit=args.limit, as_json=args.json
        )
    if args.command == "serve":
        return commands.serve(
            settings,
            term,
            host=args.host,
            port=args.port,
            scenario=args.scenario,
            socket_mode=args.socket_mode,
        )
    if args.command in ("approve", "reject"):
        return commands.decide(
            settings,
            term,
            ref=args.ref,
            decision=args.command,
            actor=args.actor or user,
            reason=args.reason,
            scenario=args.scenario,
            as_json=args.json,
        )
    if args.command == "postmortem":
        return commands.postmortem(
            settings, term, ref=args.incident, fmt=args.format, pinned=args.pinned
        )
    if args.command == "eval":
        return commands.evaluate(settings, term, paths=args.paths, as_json=args.json)
    if args.command == "classify-log":
        return commands.classify_log(term, source=args.file, as_json=args.json)
    if args.command == "runbooks":
        if args.runbooks_command == "validate":
            return commands.validate_runbooks(settings, term, paths=args.paths)
        if args.runbooks_command == "list":
            return commands.list_runbooks(settings, term)
        return commands.graph_runbook(settings, term, name=args.name)
    if args.command == "sim":
        return commands.sim_serve(term, scenario=args.scenario, host=args.host, port=args.port)
    raise UserInputError(f"unknown command '{args.command}'")


def parse_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` arguments -> dict. A malformed pair names itself."""
    inputs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserInputError(f"input '{pair}' is not KEY=VALUE")
        inputs[key] = value
    return inputs


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

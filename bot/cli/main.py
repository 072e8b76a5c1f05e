"""The `gpu-oncall` command line: a boundary. Reads Settings once, opens the runtime, renders
results with bot.cli.terminal, and turns errors into one-line messages and exit codes
(2 = bad input or configuration, naming the variable; 1 = unexpected failure with a reference
id, the traceback goes to the log). A closed standard output stops the printing, not the command.

Start-up is part of the interface: `--help` and the incident reads answer at once because this
module imports only the standard library and the error trees at load time. Each command's
module is imported inside its dispatch branch: the reads and human verbs (`bot.cli.listings`,
`bot.cli.incident_verbs`) never load LangGraph, Slack or Kubernetes; `bot.cli.runs` and
`bot.cli.serve` do. Add a command the same way: a subparser here, and an import inside its branch.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
import typing
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli.identity import acting_actor, cli_identity
from bot.cli.terminal import Terminal
from bot.errors import OncallError, PolicyDenied, UserInputError
from integrations.errors import IntegrationError
from storage.errors import BackendNotInstalledError, InvalidDatabaseUrlError, StorageError

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from bot.config import Settings

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
    alerts.add_argument(
        "--limit", type=_bounded(1, MAX_LISTED), default=50, help=f"at most {MAX_LISTED}"
    )
    alerts.add_argument("--json", action="store_true")
    _incident_verbs(sub)

    serve = sub.add_parser(
        "serve", help="HTTP server: Alertmanager webhook, /healthz, /readyz, /metrics"
    )
    serve.add_argument("--host", help="listen address (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default: server.port, 8080)")
    serve.add_argument(
        "--demo",
        action="store_true",
        help="serve the simulated fleet (both ports sim); without it, serve needs "
        "GPU_ONCALL_CLUSTER and GPU_ONCALL_TELEMETRY set",
    )
    serve.add_argument("--scenario", type=Path, help="scenario file for the simulated fleet")
    serve.add_argument(
        "--socket-mode",
        action="store_true",
        help="receive Slack over Socket Mode (no public ingress; needs slack.app_token)",
    )

    for verb in ("approve", "reject"):
        decide = sub.add_parser(verb, help=f"{verb} the pending approval of a run or incident")
        decide.add_argument("ref", metavar="RUN_OR_INCIDENT")
        decide.add_argument(
            "--as",
            dest="actor",
            help="decide for another person (needs the admin role, GPU_ONCALL_IDENTITY__ADMINS)",
        )
        decide.add_argument("--reason", default="")
        decide.add_argument(
            "--only",
            action="append",
            default=[],
            metavar="ACTION",
            help="approve only this action (repeatable); the others stay pending, "
            "with their own expiry"
            if verb == "approve"
            else "reject only this action: `--only drain` cancels a drain that waits for the "
            "next checkpoint",
        )
        decide.add_argument("--scenario", type=Path, help=argparse.SUPPRESS)
        decide.add_argument("--json", action="store_true")

    postmortem = sub.add_parser("postmortem", help="export an incident's timeline and MTTR")
    postmortem.add_argument("incident")
    postmortem.add_argument("--format", choices=["md", "json", "html"], default="md")
    postmortem.add_argument("--pinned", action="store_true", help="only pinned timeline events")
    postmortem.add_argument(
        "-o", "--output", type=Path, help="write to this file (and print its path)"
    )

    item = sub.add_parser("action", help="record a postmortem action item with owner and due date")
    item.add_argument("incident")
    item.add_argument("owner", help="who owns it, e.g. @alice")
    item.add_argument("text", nargs="+")
    item.add_argument("--due", metavar="YYYY-MM-DD", help="when it is due")
    section = sub.add_parser(
        "section", help="write a postmortem section in your words (drafts never overwrite it)"
    )
    section.add_argument("incident")
    section.add_argument(
        "section", help="summary, impact, root_cause, contributing, went_well or went_badly"
    )
    section.add_argument("text", nargs="+")

    evaluate = sub.add_parser(
        "eval", help="run scenario files through their triggers and score the diagnoses"
    )
    evaluate.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    evaluate.add_argument("--json", action="store_true", help="print the scores as JSON")

    classify = sub.add_parser("classify-log", help="classify a log (XID, NCCL, CUDA, OOM lines)")
    classify.add_argument("file", help="a log file, or - for standard input")
    classify.add_argument("--json", action="store_true")
    triage = sub.add_parser(
        "triage-bundle",
        help="one verdict over a directory or tarball of tool outputs and logs "
        "(nvidia-bug-report.log.gz, nvidia-smi -q, dcgmi diag, ibstat, kubectl, dmesg, ...)",
    )
    triage.add_argument("path", help="a directory, a .tar/.tar.gz/.tgz, or a single file")
    triage.add_argument("--json", action="store_true")

    books = sub.add_parser("runbooks", help="list, validate or graph runbooks")
    books_sub = books.add_subparsers(dest="runbooks_command", required=True, metavar="ACTION")
    validate = books_sub.add_parser(
        "validate", help="lint runbooks (default: shipped + configured)"
    )
    validate.add_argument("paths", nargs="*", type=Path)
    books_sub.add_parser("list", help="list runbooks with their triggers")
    graph = books_sub.add_parser("graph", help="print a runbook's step graph as Mermaid")
    graph.add_argument("name")

    cluster = sub.add_parser("cluster", help="check the bot's access to the configured cluster")
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    check = cluster_sub.add_parser(
        "check", help="which RBAC permissions the configured identity holds (exit 1: missing)"
    )
    check.add_argument("--json", action="store_true")

    db = sub.add_parser("db", help="the database schema (migrations)")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_sub.add_parser(
        "upgrade", help="migrate the database to this release's schema (creates it when empty)"
    )
    db_sub.add_parser(
        "current", help="the schema revision of the database and of this release (exit 1: behind)"
    )

    sim = sub.add_parser("sim", help="the simulated fleet's endpoints for a real Prometheus")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True, metavar="ACTION")
    serve_sim = sim_sub.add_parser(
        "serve", help="serve a scenario's exporter metrics (/metrics) for Prometheus to scrape"
    )
    serve_sim.add_argument("--scenario", type=Path, required=True, help="scenario file")
    serve_sim.add_argument("--port", type=int, default=9400, help="0 picks a free port")
    serve_sim.add_argument("--host", default="127.0.0.1")
    _safety_verbs(sub)
    return parser


def _safety_verbs(sub: Any) -> None:
    """`pause`, `resume` and `breaker status|reset` (bot/cli/safety.py)."""
    pause = sub.add_parser("pause", help="stop every action that changes the cluster, saying why")
    pause.add_argument("reason", nargs="+")
    sub.add_parser("resume", help="end the pause (approvers only)")
    breaker = sub.add_parser("breaker", help="the circuit breaker of cordons/drains")
    breaker.add_argument("breaker_command", choices=["status", "reset"])
    breaker.add_argument("--reason", default="", help="why it is reset (on the record)")
    breaker.add_argument("--json", action="store_true")


MAX_LISTED = 10_000


def _incident_verbs(sub: Any) -> None:
    """`incident`, `mttr` and the human verbs (the same as Slack's `/gpu` ones)."""
    show = sub.add_parser("incident", help="one incident: timestamps, MTTx, GPU-hours, timeline")
    show.add_argument("incident", metavar="INC-N")
    show.add_argument("--json", action="store_true")
    mttr = sub.add_parser(
        "mttr", help="MTTD, MTTA, time to diagnosis, MTTM, MTTR (p50/p90) and GPU-hours lost"
    )
    mttr.add_argument("--since", default="7d", help="window: 90m, 24h, 7d, 2w (default 7d)")
    mttr.add_argument("--by", choices=["runbook", "layer", "week"], default="runbook")
    mttr.add_argument("--json", action="store_true")
    verbs = {
        "ack": "acknowledge an incident",
        "resolve": "resolve an incident by hand, saying why (--reason)",
        "note": "add a note to an incident's timeline",
        "pin": "pin a timeline event (its #number in `incident`) into the postmortem story",
        "unpin": "take a timeline event out of the pinned story",
        "fired": "say when impact began (UTC: 14:05, 14:05:30, 2026-11-24T14:05Z); MTTx follow",
    }
    for verb, text in verbs.items():
        parser = sub.add_parser(verb, help=text)
        parser.add_argument("incident", metavar="INC-N")
        parser.add_argument(
            "--as", dest="actor", help="for another person (needs the admin role)"
        )
        if verb == "resolve":
            parser.add_argument("--reason", required=True)
        if verb == "note":
            parser.add_argument("text", nargs="+")
            parser.add_argument("--pin", action="store_true", help="pin the note")
        if verb in ("pin", "unpin"):
            parser.add_argument("event", metavar="EVENT", help="#42 or 42")
        if verb == "fired":
            parser.add_argument("time", metavar="TIME")
            parser.add_argument("reason", nargs="*")


HUMAN_VERBS = ("ack", "resolve", "note", "pin", "unpin", "fired")


def _bounded(low: int, high: int) -> Any:
    """An argparse type: an integer from `low` to `high` (argparse prints the error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


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
        code = _main(args, term)
    finally:
        term.release()
    if code == INTERRUPTED and argv is None:
        _exit_now(code)
    return code


INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT)."""


def _exit_now(code: int) -> None:
    """Leave at once after Ctrl-C, without joining the step threads: one may be inside a
    drain that waits for evictions, and the interpreter would wait for it at exit. Nothing is
    lost: a run's work is durable (checkpoints, leased work rows, the action ledger) and is
    taken over as after a crash, which the SIGKILL journeys prove."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def _main(args: argparse.Namespace, term: Terminal) -> int:
    try:
        if args.command in LIGHT_READS:
            done = _light_read(args, term)
            if done is not None:
                return done
        settings = read_settings()
        from bot.cli.log_format import configure_logging

        configure_logging(settings, command=args.command)
        return dispatch(args, settings, term)
    except PolicyDenied as exc:  # a refused approval: README promises exit 2
        _err(f"gpu-oncall: refused: {exc.reason}")
        return 2
    except (UserInputError, IntegrationError) as exc:
        _err(f"gpu-oncall: error: {exc}")
        return 2
    except (BackendNotInstalledError, InvalidDatabaseUrlError) as exc:
        _err(f"gpu-oncall: error: GPU_ONCALL_STORAGE__URL: {exc} (valid: {DATABASE_URLS})")
        return 2
    except BrokenPipeError:
        # The reader went away while something other than the Terminal wrote (the approval
        # prompt); a run waits at its checkpoint. Exit as a process killed by SIGPIPE would.
        term.closed = True
        return 128 + signal.SIGPIPE
    except (OncallError, StorageError) as exc:
        _err(f"gpu-oncall: {exc}")
        return 1
    except KeyboardInterrupt:
        _err("gpu-oncall: interrupted")
        return INTERRUPTED
    except Exception:  # boundary: log the traceback, show a reference
        ref = uuid.uuid4().hex[:6]
        logger.exception("unexpected error (ref %s)", ref)
        _err(f"gpu-oncall: unexpected error (ref {ref}); the log has details")
        return 1


def dispatch(args: argparse.Namespace, settings: Settings, term: Terminal) -> int:
    user = cli_identity(configured=settings.identity.cli_user)
    if args.command in ("incidents", "incident", "alerts", "mttr"):
        return _read(args, settings, term)
    if args.command in HUMAN_VERBS:
        actor = acting_actor(user=user, acting_as=args.actor, admins=settings.identity.admins)
        return _record(args, settings, term, actor=actor)
    if args.command in ("pause", "resume", "breaker"):
        from bot.cli import safety as safety_commands

        if args.command == "pause":
            return safety_commands.pause(settings, term, reason=" ".join(args.reason), actor=user)
        if args.command == "resume":
            return safety_commands.resume(settings, term, actor=user)
        return safety_commands.breaker_command(
            settings,
            term,
            action=args.breaker_command,
            reason=args.reason,
            actor=user,
            as_json=args.json,
        )
    if args.command == "postmortem":
        from bot.cli import postmortems as postmortem_commands

        return postmortem_commands.postmortem(
            settings,
            term,
            ref=args.incident,
            fmt=args.format,
            pinned=args.pinned,
            output=args.output,
        )
    if args.command in ("action", "section"):
        from bot.cli import postmortems as postmortem_commands

        text = " ".join(args.text)
        if args.command == "action":
            return postmortem_commands.add_action_item(
                settings, term, ref=args.incident, owner=args.owner, text=text, due=args.due,
                actor=user,
            )
        return postmortem_commands.write_section(
            settings, term, ref=args.incident, section=args.section, text=text, actor=user
        )
    if args.command in ("demo", "diagnose", "run", "approve", "reject"):
        return _runs(args, settings, term, user=user)
    if args.command == "serve":
        from bot.cli.serve import serve

        return serve(
            settings,
            term,
            host=args.host,
            port=args.port,
            scenario=args.scenario,
            socket_mode=args.socket_mode,
            demo=args.demo,
        )
    if args.command == "eval":
        from bot.cli.simulated import evaluate

        return evaluate(settings, term, paths=args.paths, as_json=args.json)
    if args.command == "sim":
        from bot.cli.simulated import sim_serve

        return sim_serve(term, scenario=args.scenario, host=args.host, port=args.port)
    if args.command == "classify-log":
        from bot.cli.evidence import classify_log

        return classify_log(term, source=args.file, as_json=args.json)
    if args.command == "triage-bundle":
        from bot.cli.evidence import triage_bundle

        return triage_bundle(term, path=args.path, as_json=args.json)
    if args.command == "runbooks":
        from bot.cli import runbooks

        if args.runbooks_command == "validate":
            return runbooks.validate_runbooks(settings, term, paths=args.paths)
        if args.runbooks_command == "list":
            return runbooks.list_runbooks(settings, term)
        return runbooks.graph_runbook(settings, term, name=args.name)
    if args.command == "cluster":
        from bot.cli.checking import cluster_check

        return cluster_check(settings, term, as_json=args.json)
    if args.command == "db":
        from bot.cli import db

        if args.db_command == "upgrade":
            return db.db_upgrade(settings, term)
        return db.db_current(settings, term)
    raise UserInputError(f"unknown command '{args.command}'")


def _runs(args: argparse.Namespace, settings: Settings, term: Terminal, *, user: str) -> int:
    """Runs of runbooks and their approvals: the engine and LangGraph (bot/cli/runs.py)."""
    from bot.cli import runs
    from bot.intake.commands import parse_pairs

    if args.command == "demo":
        return runs.demo(settings, term, scenario=args.scenario, yes=args.yes, user=user)
    if args.command in ("approve", "reject"):
        return runs.decide(
            settings,
            term,
            ref=args.ref,
            decision=args.command,
            actor=acting_actor(user=user, acting_as=args.actor, admins=settings.identity.admins),
            reason=args.reason,
            scenario=args.scenario,
            as_json=args.json,
            only=[a for item in getattr(args, "only", []) for a in item.split(",") if a],
        )
    diagnose = args.command == "diagnose"
    return runs.run_runbook(
        settings,
        term,
        runbook="node-diagnose" if diagnose else args.runbook,
        inputs={"node": args.node} if diagnose else parse_pairs(args.inputs),
        scenario=args.scenario,
        as_json=args.json,
        yes=args.yes,
        user=user,
    )


def _read(args: argparse.Namespace, settings: Settings, term: Terminal) -> int:
    """The incident reads: no engine, LangGraph, Slack or Kubernetes (bot/cli/listings.py)."""
    from bot.cli import listings

    if args.command == "incidents":
        return listings.list_incidents(settings, term, include_resolved=args.all, as_json=args.json)
    if args.command == "incident":
        return listings.show_incident(settings, term, ref=args.incident, as_json=args.json)
    if args.command == "alerts":
        return listings.list_alerts(
            settings, term, unrouted=args.unrouted, limit=args.limit, as_json=args.json
        )
    from bot.intake.windows import parse_window

    window = parse_window(args.since)
    return listings.mttr(
        settings, term, window=window, label=args.since, by=args.by, as_json=args.json
    )


LIGHT_READS = ("incidents", "incident", "mttr", "alerts", "classify-log")
"""Read-only commands answered without `Settings` (and the reads without the ORM) when nothing
needs them; `classify-log` reads no setting at all."""


def _light_read(args: argparse.Namespace, term: Terminal) -> int | None:
    """A read-only command on the light path (bot/cli/read_config.py, storage/glance.py), or
    None when only the full path may answer; it prints what the full path prints. The logging
    stays `main`'s: the same as `configure_logging` with no `GPU_ONCALL_LOG__*` set, which the
    light reader requires."""
    from bot.cli.read_config import read_light

    config = read_light()
    if config is None:
        return None
    if args.command == "classify-log":
        from bot.cli.evidence import classify_log

        return classify_log(term, source=args.file, as_json=args.json)
    from bot.cli import listings

    return listings.light_read(args, config, term)


def _record(args: argparse.Namespace, settings: Settings, term: Terminal, *, actor: str) -> int:
    """The human verbs (bot/cli/incident_verbs.py), as light as the reads."""
    from bot.cli import incident_verbs as verbs

    ref = args.incident
    if args.command == "ack":
        return verbs.ack(settings, term, ref=ref, actor=actor)
    if args.command == "resolve":
        return verbs.resolve(settings, term, ref=ref, reason=args.reason, actor=actor)
    if args.command == "note":
        text = " ".join(args.text)
        return verbs.note(settings, term, ref=ref, text=text, pin=args.pin, actor=actor)
    if args.command in ("pin", "unpin"):
        pinned = args.command == "pin"
        return verbs.pin(settings, term, ref=ref, event=args.event, pinned=pinned, actor=actor)
    reason = " ".join(args.reason)
    return verbs.fired(settings, term, ref=ref, when=args.time, reason=reason, actor=actor)



class ConfigurationError(UserInputError):
    """A setting (environment variable or `.env` line) has a value that is not valid."""


ENV_PREFIX = "GPU_ONCALL_"
DATABASE_URLS = "sqlite:///PATH/oncall.db or postgresql+psycopg://USER@HOST/DB"
_SECRET_WORDS = ("token", "secret", "password", "url", "headers")


def read_settings() -> Settings:
    """Settings from the environment and `.env`; a bad value is one ConfigurationError line
    naming the variable and what is valid (never the value of a secret or a URL).
    Imported here, not at load time: `--help` never pays for pydantic."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from bot.config import UnknownSettingError, read_settings_checked

    try:
        return read_settings_checked()
    except UnknownSettingError as exc:
        raise ConfigurationError(str(exc)) from exc
    except ValidationError as exc:
        raise ConfigurationError(describe_invalid_setting(exc)) from exc
    except SettingsError as exc:
        raise ConfigurationError(describe_unparsable_setting(exc)) from exc


def describe_invalid_setting(exc: ValidationError) -> str:
    """`GPU_ONCALL_TELEMETRY='k8s': Input should be 'sim' or 'prometheus'`."""
    errors = exc.errors()
    first = errors[0]
    names = [str(p) for p in first["loc"] if isinstance(p, str)]
    variable = ENV_PREFIX + "__".join(names).upper()
    shown = ""
    value = first.get("input")
    if isinstance(value, str | int | float) and not any(
        word in variable.lower() for word in _SECRET_WORDS
    ):
        shown = f"={str(value)[:60]!r}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"configuration: {variable}{shown}: {first['msg']}{more}"


def describe_unparsable_setting(exc: SettingsError) -> str:
    """`GPU_ONCALL_RUNBOOK_DIRS is not valid JSON ...`: lists and mappings are read as JSON."""
    from pydantic import BaseModel

    from bot.config import Settings

    found = re.search(r'field "(\w+)"', str(exc))
    field = Settings.model_fields.get(found.group(1)) if found else None
    if found is None or field is None:
        return f"configuration: {exc}"
    variable = ENV_PREFIX + found.group(1).upper()
    example = _json_example(field.annotation)
    group = field.annotation
    if isinstance(group, type) and issubclass(group, BaseModel):
        inner = {
            f"{variable}__{name.upper()}": _json_example(sub.annotation)
            for name, sub in group.model_fields.items()
            if _json_example(sub.annotation)
        }
        variable = " or ".join([*inner, variable])
        example = next(iter(inner.values()), None)
    example = example or """'["a", "b"]' or '{"key": "value"}'"""
    reason = f" ({exc.__cause__})" if exc.__cause__ else ""
    return f"configuration: {variable} is not valid JSON{reason}; write it as JSON, e.g. {example}"


def _json_example(annotation: Any) -> str | None:
    """How a list- or mapping-typed setting is written, or None for a plain value."""
    for arg in (annotation, *typing.get_args(annotation)):
        origin = typing.get_origin(arg) or arg
        if origin in (list, tuple, set, frozenset):
            return "'[\"/etc/gpu-oncall/runbooks\"]'" if "Path" in str(arg) else "'[\"a\", \"b\"]'"
        if origin is dict:
            return "'{\"key\": \"value\"}'"
    return None


def _err(text: str) -> None:
    # When nobody reads standard error either, the exit code still tells.
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.write(text + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

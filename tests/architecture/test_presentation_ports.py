"""Presentation code (bot/slack, bot/cli, bot/serving) receives the ports it needs (the database
engine, the clock, the run engine, the catalog), not the Runtime bag: no `rt.db`, `runtime.db`
or `something.rt.db` outside the few places listed below, each with its reason.

An AST check over the source: a Runtime travels as `rt` (or `runtime`) by convention, so any
`.db` read off such a name is the Runtime's database. A listed place that no longer reads it
fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRESENTATION = ("bot/slack", "bot/cli", "bot/serving")
RUNTIME_NAMES = frozenset({"rt", "runtime"})

ALLOWED = {
    ("bot.slack.app", "make_slack_bot"): "assembles Slack: unpacks the open runtime into the "
    "ports its handlers receive (SlackDeps)",
    ("bot.serving.app", "create_app"): "assembles the HTTP app: unpacks the open runtime into "
    "the ports of the app and of its triage workers",
    ("bot.cli.journeys", "after_run"): "shared with `approve`/`reject` (bot/cli/runs.decide), "
    "which the same approval change rewrites",
    ("bot.cli.journeys", "settle_simulated_alert"): "shared with `approve`/`reject`",
    ("bot.cli.journeys", "alert_journey"): "the `demo` journey over the runtime bot/cli/runs.py "
    "opens; it hands the database to its steps (print_incident, write_html_postmortem)",
    ("bot.cli.journeys", "command_journey"): "the `run`/`diagnose` journey, likewise; its "
    "callers (runs.py, the journey tests) pass the runtime",
}


def runtime_db_reads(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(enclosing function, line) of every `.db` read off a name that holds a Runtime."""
    stack: list[tuple[ast.AST, str]] = [(tree, "<module>")]
    while stack:
        node, function = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr == "db" and _holds_runtime(node.value):
            yield function, node.lineno
        stack.extend((child, function) for child in ast.iter_child_nodes(node))


def _holds_runtime(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in RUNTIME_NAMES
    return isinstance(node, ast.Attribute) and node.attr in RUNTIME_NAMES


def reads_in_presentation() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for folder in PRESENTATION:
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for function, line in runtime_db_reads(ast.parse(path.read_text(), str(path))):
                found.setdefault((module, function), []).append(line)
    return found


def _allowed(module: str, function: str) -> bool:
    return (module, function) in ALLOWED or (module, "*") in ALLOWED


def test_the_check_sees_the_runtime_database_however_it_is_reached() -> None:
    source = (
        "def f(rt, deps, self):\n"
        "    rt.db\n"
        "    deps.rt.db\n"
        "    self.deps.rt.db\n"
        "    runtime.db\n"
        "    deps.db\n"
        "    self.db\n"
        "    rt.engine\n"
    )
    assert sorted(line for _, line in runtime_db_reads(ast.parse(source))) == [2, 3, 4, 5]


def test_presentation_reads_no_database_through_a_runtime() -> None:
    found = reads_in_presentation()
    unlisted = {f"{m}.{f}": lines for (m, f), lines in found.items() if not _allowed(m, f)}
    assert unlisted == {}, "take the database as a port (`db: Engine`), not through the Runtime"


def test_every_listed_exception_still_reads_it() -> None:
    found = reads_in_presentation()
    stale = [
        key for key in ALLOWED if not any(m == key[0] and key[1] in ("*", f) for m, f in found)
    ]
    assert stale == [], "no longer needed: remove from ALLOWED"

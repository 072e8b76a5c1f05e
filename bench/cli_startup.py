"""Start-up time of the `gpu-oncall` command line: wall time from exec to exit of the real
console script, per command, on a SQLite database holding `--incidents` incidents.

The commands measured are the ones a person types while an incident runs and expects an answer
from at once: `--help`, `incidents`, `incidents --all`, `incident INC-1`, `alerts`, `mttr`, and
`classify-log` on a one-line file. `--demo` measures on the database `gpu-oncall demo` leaves.
Each is run `--runs` times in a fresh process (no warm interpreter); the table gives the
minimum wall time (the start-up cost on an idle machine), the median (what a busy machine gives),
the minimum CPU time (user + system: what a shared machine distorts least), and the modules each
command imported (from `python -X importtime`) that a listing should not need.
Commands this release does not have are reported as such, so the script also measures an
older tree (the "before" figures in docs/performance.md).

    python bench/cli_startup.py --runs 10 [--demo]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("gpu-oncall")
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("incidents",),
    ("incidents", "--all"),
    ("incident", "INC-1"),
    ("alerts",),
    ("mttr", "--since", "30d"),
    ("classify-log", "{log}"),
)
LOG_LINE = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
"""The small file `classify-log` reads (one XID 79 line)."""
HEAVY = ("langgraph", "langchain_core", "slack_bolt", "slack_sdk", "kubernetes", "httpx")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def seed(url: str, incidents: int) -> None:
    """A migrated database with `incidents` resolved incidents (via the bot's own lifecycle)."""
    from bot.incidents import lifecycle
    from bot.incidents.states import IncidentState
    from storage.db import create_schema, make_engine, session_scope

    db = make_engine(url)
    create_schema(db)
    with session_scope(db) as session:
        for n in range(incidents):
            at = T0 + timedelta(hours=n)
            row = lifecycle.open_incident(
                session,
                runbook="ecc-storm",
                target=f"gpu-node-{n:03d}",
                target_kind="node",
                severity="critical",
                title=f"ECC storm on gpu-node-{n:03d}",
                fired_at=at,
                detected_at=at + timedelta(seconds=20),
                actor="alertmanager",
            )
            lifecycle.transition(
                session,
                row,
                to=IncidentState.RESOLVED,
                at=at + timedelta(minutes=9),
                actor="bot",
                reason="bench",
            )
    db.dispose()


def command(args: tuple[str, ...], root: Path | None) -> list[str]:
    """The console script, or (with `root`: another checkout, e.g. `git archive` of an older
    commit) the same entry point run from that tree's sources."""
    if root is None:
        return [str(EXE), *args]
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from bot.cli.main import main; "
    return [sys.executable, "-c", code + "sys.exit(main(sys.argv[1:]))", *args]


def seed_in(root: Path | None, url: str, incidents: int) -> None:
    """`seed` with the code of the tree measured (its schema revisions are the ones it knows)."""
    path = f"sys.path.insert(0, {str(root)!r}); " if root else ""
    bench = str(Path(__file__).resolve().parent)
    code = (
        f"import sys; {path}sys.path.insert(1, {bench!r}); "
        f"from cli_startup import seed; seed({url!r}, {incidents})"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def run_once(
    args: tuple[str, ...], env: dict[str, str], root: Path | None = None
) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child: user + system, exit code). CPU time is what a
    busy shared machine distorts least; wall time is what a person waits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command(args, root), env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def heavy_imports(args: tuple[str, ...], env: dict[str, str], root: Path | None) -> list[str]:
    """The heavy top-level packages the command imported (from -X importtime)."""
    path = f"sys.path.insert(0, {str(root)!r}); " if root else ""
    code = f"import sys; {path}from bot.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seen = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()}
    return sorted(seen & set(HEAVY))


def seed_demo(url: str, cwd: str) -> None:
    """The database `gpu-oncall demo --yes` leaves: one incident with its alerts, run, actions,
    approval and timeline (what a person's reads meet), made by this tree."""
    env = os.environ | {"GPU_ONCALL_STORAGE__URL": url, "NO_COLOR": "1"}
    subprocess.run(
        [str(EXE), "demo", "--yes"], env=env, cwd=cwd, capture_output=True, check=True
    )


def measure(
    runs: int, incidents: int, root: Path | None = None, *, demo: bool = False
) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/oncall.db"
        if demo:
            seed_demo(url, tmp)
        else:
            seed_in(root, url, incidents)
        log = Path(tmp) / "kern.log"
        log.write_text(LOG_LINE)
        env = os.environ | {"GPU_ONCALL_STORAGE__URL": url, "NO_COLOR": "1"}
        for template in COMMANDS:
            args = tuple(a.format(log=log) for a in template)
            shown = " ".join(template).replace("{log}", "kern.log")
            first = run_once(args, env, root)
            if first[2] == 2 and "invalid choice" in _stderr(args, env, root):
                results.append({"command": shown, "missing": True})
                continue
            samples = [first] + [run_once(args, env, root) for _ in range(runs - 1)]
            walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
            results.append(
                {
                    "command": shown,
                    "exit": first[2],
                    "min_s": round(min(walls), 3),
                    "median_s": round(statistics.median(walls), 3),
                    "cpu_min_s": round(min(cpus), 3),
                    "heavy_imports": heavy_imports(args, env, root),
                }
            )
    return results


def _stderr(args: tuple[str, ...], env: dict[str, str], root: Path | None) -> str:
    done = subprocess.run(command(args, root), env=env, capture_output=True, text=True, check=False)
    return done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per command")
    parser.add_argument("--incidents", type=int, default=50, help="incidents in the database")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--demo",
        action="store_true",
        help="measure on the database `gpu-oncall demo --yes` leaves instead of --incidents",
    )
    parser.add_argument(
        "--root",
        type=Path,
        help="measure another tree's CLI (e.g. `git archive <commit> bot integrations storage "
        "runbooks | tar -x -C DIR`); the database is seeded by this tree",
    )
    opts = parser.parse_args()
    from common import machine  # imports this tree's packages: not in the seeding process

    results = measure(max(opts.runs, 1), opts.incidents, opts.root, demo=opts.demo)
    print(f"machine: {machine()}")
    print(f"{'COMMAND':<26} {'MIN':>7} {'MEDIAN':>7} {'CPU':>7}  HEAVY IMPORTS")
    for row in results:
        if row.get("missing"):
            print(f"{row['command']:<26} {'(no such command in this tree)':>16}")
            continue
        heavy = ", ".join(row["heavy_imports"]) or "-"
        print(
            f"{row['command']:<26} {row['min_s']:>6.3f}s {row['median_s']:>6.3f}s "
            f"{row['cpu_min_s']:>6.3f}s  {heavy}"
        )
    if opts.json:
        opts.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=2))


if __name__ == "__main__":
    main()

"""README's command table names every command the CLI has, and nothing it does not have.

Covers: each subcommand of `gpu-oncall`'s parser appears in the first column of README's
"Using it" table (as `gpu-oncall VERB ...` or a backticked `VERB ...` after it in the same
cell), and every verb named there is one the parser knows (or a subcommand of one, as
`runbooks list`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bot.cli.main import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def parser_verbs() -> set[str]:
    return set(subcommands(build_parser()))


def every_subcommand() -> set[str]:
    """The verbs and their own subcommands (`runbooks list`, `db upgrade`)."""
    verbs = subcommands(build_parser())
    return set(verbs).union(*(subcommands(p) for p in verbs.values()))


def readme_verbs() -> set[str]:
    """The first word of each backticked span in the first cell of `gpu-oncall` table rows."""
    verbs: set[str] = set()
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `gpu-oncall "):
            continue
        first_cell = re.split(r"(?<!\\)\|", line)[1]
        for span in re.findall(r"`([^`]+)`", first_cell):
            words = span.removeprefix("gpu-oncall ").split()
            if words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
                verbs.add(words[0])
    return verbs


def test_every_cli_verb_is_in_the_readme_table() -> None:
    missing = parser_verbs() - readme_verbs()
    assert not missing, f"README.md's command table lacks: {', '.join(sorted(missing))}"


def test_the_readme_table_names_no_verb_the_cli_lacks() -> None:
    unknown = readme_verbs() - every_subcommand()
    assert not unknown, f"README.md names commands the CLI does not have: {sorted(unknown)}"

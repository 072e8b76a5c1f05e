"""One place states every limit (issue 20): docs/limits.md lists each limit of
`bot.limits.documented()` with its default and the setting or constant that holds it.

Covers: every documented limit's name, default and setting appear on one row of the page.
"""

from __future__ import annotations

from pathlib import Path

from bot.limits import documented

PAGE = Path(__file__).resolve().parents[2] / "docs" / "limits.md"


def test_every_limit_is_on_the_limits_page_with_its_default_and_setting() -> None:
    rows = [line for line in PAGE.read_text().splitlines() if line.startswith("| ")]
    for limit in documented():
        row = next((r for r in rows if r.startswith(f"| {limit.what} |")), None)
        assert row is not None, f"docs/limits.md has no row for {limit.what!r}"
        assert limit.default in row, (limit.what, limit.default)
        if limit.setting != "fixed":
            assert limit.setting in row, (limit.what, limit.setting)

"""Untrusted text reaches a terminal without its control characters (issue 20).

Covers: `triage-bundle` over a log whose lines carry terminal escape sequences (retitle, clear
screen, C1 CSI) prints none of them; `printable` keeps tab and newline and replaces every other
C0/C1 control, for any text.
"""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from bot.cli.evidence import triage_bundle
from bot.cli.terminal import Terminal, printable

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


def test_triage_bundle_prints_no_escape_sequence(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(
        f"Jan 1 00:00:01 gpu-node-03 kernel: NVRM: Xid (PCI:0000:3b:00): 79, {ESCAPES}"
        " GPU has fallen off the bus.\n"
    )
    out = io.StringIO()
    assert triage_bundle(Terminal(out, color=False), path=str(log), as_json=False) == 0
    printed = out.getvalue()
    assert "verdict:" in printed
    for char in ("\x1b", "\x07", "\x9b"):
        assert char not in printed


@given(st.text())
def test_printable_leaves_no_control_but_tab_and_newline(text: str) -> None:
    shown = printable(text)
    assert len(shown) == len(text)
    for char in shown:
        code = ord(char)
        assert char in "\t\n" or not (code < 0x20 or 0x7F <= code <= 0x9F)

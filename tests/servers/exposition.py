"""Read values back out of a text exposition (what an exporter served), for assertions."""

from __future__ import annotations

import re
from collections.abc import Mapping

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample line as (metric, labels, value); comments skipped."""
    out: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        labels = {
            k: re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m[0]], v)
            for k, v in _LABEL.findall(match["labels"] or "")
        }
        out.append((match["name"], labels, float(match["value"])))
    return out


def sample_value(text: str, metric: str, selector: Mapping[str, str]) -> float:
    """The value of the one sample of `metric` whose labels include `selector`."""
    found = [
        value
        for name, labels, value in parse_samples(text)
        if name == metric and all(labels.get(k) == v for k, v in selector.items())
    ]
    assert len(found) == 1, f"{len(found)} samples of {metric}{dict(selector)}"
    return found[0]

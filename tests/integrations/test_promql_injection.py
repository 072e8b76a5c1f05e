"""PromQL injection: no interpolated value can change a rendered query's shape.

Covers: hostile node names, workloads and matcher values (quote-and-brace breakouts, regex
wildcards, newlines, backslashes) render to a query whose structure, with every string literal
blanked out, is identical to the query for a harmless value; the node regex, unquoted, matches
exactly the literal names and nothing else; Prometheus' own parser (`promtool check rules`)
accepts every rendered query; and validation upstream refuses such node names before any
adapter sees them (the renderer is safe on its own regardless).
"""

from __future__ import annotations

import json
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from servers.prometheus import require_binary

from integrations.errors import InvalidName
from integrations.promql import render_signal
from integrations.signals import SignalCatalog
from integrations.telemetry import SignalQuery

HOSTILE = [
    'x"} or vector(1) or {a="',
    'gpu-node-01"}',
    'a\\"} or on() vector(1) #',
    ".*",
    "gpu-node-0[1-9]",
    "^gpu|.*$",
    "x\n) or vector(1)",
    "\\",
    "' or '1'='1",
    "ünïcödé-节点",
]
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
SIGNALS = ["gpu.ecc.dbe_rate", "gpu.xid.changes", "gpu.xid.last", "k8s.node.ready"]


def skeleton(promql: str) -> str:
    """The query with every string literal replaced by `"_"`: its shape."""
    return STRING.sub('"_"', promql)


def node_regex(promql: str, host_label: str) -> str:
    """The unquoted value of the `<host>=~"..."` matcher, as Python `re` syntax."""
    match = re.search(rf'{host_label}=~"((?:[^"\\]|\\.)*)"', promql)
    assert match is not None, promql
    unquoted = str(json.loads(f'"{match[1]}"'))
    return re.sub(r"\\x\{([0-9a-f]{2})\}", r"\\x\1", unquoted)


@pytest.mark.parametrize("evil", HOSTILE)
@pytest.mark.parametrize("signal", SIGNALS)
def test_hostile_node_name_keeps_the_query_shape(
    catalog: SignalCatalog, signal: str, evil: str
) -> None:
    spec = catalog.get(signal)
    window = timedelta(minutes=15)
    hostile = render_signal(spec, window=window, host_label="Hostname", nodes=[evil, "gpu-node-01"])
    harmless = render_signal(
        spec, window=window, host_label="Hostname", nodes=["harmless", "gpu-node-01"]
    )
    assert skeleton(hostile.promql) == skeleton(harmless.promql)
    pattern = node_regex(hostile.promql, "Hostname")
    assert re.fullmatch(pattern, evil)
    assert re.fullmatch(pattern, "gpu-node-01")
    for other in ("gpu-node-02", "x", "", "anything at all", 'x"}'):
        assert not re.fullmatch(pattern, other)


@pytest.mark.parametrize("evil", HOSTILE)
def test_hostile_workload_and_match_values_stay_inside_their_strings(
    catalog: SignalCatalog, evil: str
) -> None:
    spec = catalog.get("gpu.ecc.dbe_rate").model_copy(update={"selector": "workload"})
    hostile = render_signal(
        spec,
        window=timedelta(minutes=5),
        host_label="Hostname",
        workload=evil,
        workload_label="job",
        match={"cluster": evil},
    )
    harmless = render_signal(
        spec,
        window=timedelta(minutes=5),
        host_label="Hostname",
        workload="w",
        workload_label="job",
        match={"cluster": "c"},
    )
    assert skeleton(hostile.promql) == skeleton(harmless.promql)
    values = [json.loads(f'"{v}"') for v in STRING.findall(hostile.promql)]
    assert values == [evil, evil]


def test_prometheus_parser_accepts_every_hostile_query(
    catalog: SignalCatalog, tmp_path: Path
) -> None:
    promtool = require_binary("promtool", package="prometheus")
    rules = [
        {
            "record": f"injection:test_{i}",
            "expr": render_signal(
                catalog.get(signal),
                window=timedelta(minutes=15),
                host_label="Hostname",
                nodes=[evil],
            ).promql,
        }
        for i, (signal, evil) in enumerate((s, e) for s in SIGNALS for e in HOSTILE)
    ]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "injection", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout


@pytest.mark.parametrize("evil", HOSTILE)
def test_signal_queries_refuse_hostile_node_names_before_any_adapter(evil: str) -> None:
    with pytest.raises(InvalidName):
        SignalQuery(signal="gpu.ecc.dbe_rate", nodes=(evil,))

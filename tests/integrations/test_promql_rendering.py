"""PromQL rendering of signals (integrations.promql), pure.

Covers: label-value escaping (backslash, quote, newline) and RE2 quoting; the node-set regex
(deduplicated, anchored, one alternation for many nodes); durations; one query per signal
whatever the node count; each range function's shape (`max by (<host>, <identity>)`, `changes`
over a 30 s subquery that ignores the XID gauge's err_code/err_msg churn, scale, `match`
labels, `agg`, histogram `quantile`, label joins, workload selection); host labels from
settings (`hostname`); the nodes of a workload or of the fleet resolved in the same query,
with marker rows for nodes without a sample; label names that are not Prometheus label names
are refused.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from integrations.errors import InvalidName
from integrations.promql import (
    MISSING_LABEL,
    escape_label_value,
    escape_regex,
    regex_alternation,
    render_duration,
    render_signal,
)
from integrations.signals import SignalCatalog, SignalSpec

W = timedelta(minutes=15)


def spec(**fields: object) -> SignalSpec:
    base: dict[str, object] = {"layer": "gpu_hardware", "help": "h", "source": "dcgm"}
    return SignalSpec.model_validate(base | fields)


def test_label_values_escape_backslash_quote_and_newline() -> None:
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


def test_regex_quoting_leaves_no_metacharacter_or_raw_control_character() -> None:
    quoted = escape_regex("a.b*c(d)|e[f]{g}^h$i+j?k\\l\nm")
    assert quoted == "a\\.b\\*c\\(d\\)\\|e\\[f\\]\\{g\\}\\^h\\$i\\+j\\?k\\\\l\\x{0a}m"
    assert re.fullmatch(quoted.replace("\\x{0a}", "\\x0a"), "a.b*c(d)|e[f]{g}^h$i+j?k\\l\nm")


def test_node_regex_is_anchored_deduplicated_and_ordered() -> None:
    assert regex_alternation(["gpu-node-01", "gpu-node-02", "gpu-node-01"]) == (
        "^(?:gpu-node-01|gpu-node-02)$"
    )
    with pytest.raises(ValueError):
        regex_alternation([])


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(minutes=15), "15m"),
        (timedelta(seconds=30), "30s"),
        (timedelta(seconds=90), "90s"),
        (timedelta(hours=6), "6h"),
        (timedelta(days=1), "1d"),
        (timedelta(milliseconds=1500), "1500ms"),
    ],
)
def test_durations_render_in_the_largest_exact_unit(delta: timedelta, text: str) -> None:
    assert render_duration(delta) == text


def test_a_thousand_nodes_render_into_one_query(catalog: SignalCatalog) -> None:
    nodes = [f"gpu-node-{i:04d}" for i in range(1024)]
    text = render_signal(
        catalog.get("gpu.ecc.dbe_rate"), window=W, host_label="Hostname", nodes=nodes
    )
    assert text.promql.count("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == 1
    assert text.promql.count("gpu-node-") == 1024


def test_rate_keeps_exactly_host_and_identity_labels_and_scales(catalog: SignalCatalog) -> None:
    text = render_signal(
        catalog.get("gpu.ecc.dbe_rate"),
        window=W,
        host_label="Hostname",
        nodes=["gpu-node-01", "gpu-node-02"],
    )
    assert text.promql == (
        "max by (Hostname, gpu, UUID) (rate(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
        '{Hostname=~"^(?:gpu-node-01|gpu-node-02)$"}[15m])) * 60.0'
    )
    assert text.labels == ("Hostname", "gpu", "UUID")


def test_xid_changes_ignore_err_code_churn_through_a_30s_subquery(catalog: SignalCatalog) -> None:
    text = render_signal(
        catalog.get("gpu.xid.changes"), window=W, host_label="Hostname", nodes=["gpu-node-03"]
    )
    inner = 'max by (Hostname, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS{Hostname=~"^(?:gpu-node-03)$"})'
    assert text.promql == f"max by (Hostname, gpu, UUID) (changes({inner}[15m:30s]))"
    assert "err_code" not in text.promql


def test_last_keeps_the_kept_labels(catalog: SignalCatalog) -> None:
    text = render_signal(
        catalog.get("gpu.xid.last"), window=W, host_label="hostname", nodes=["gpu-node-03"]
    )
    assert text.promql.startswith("max by (hostname, gpu, UUID, err_code) (DCGM_FI_DEV_XID")
    assert 'hostname=~"^(?:gpu-node-03)$"' in text.promql


def test_match_labels_and_extra_matchers_go_on_the_selector(catalog: SignalCatalog) -> None:
    text = render_signal(
        catalog.get("k8s.node.ready"),
        window=timedelta(minutes=5),
        host_label="node",
        nodes=["gpu-node-14"],
        match={"cluster": "h100-east"},
    )
    assert text.promql == (
        'max by (node) (min_over_time(kube_node_status_condition{cluster="h100-east",'
        'condition="Ready",status="true",node=~"^(?:gpu-node-14)$"}[5m]))'
    )


def test_a_fleet_wide_read_marks_every_node_without_a_sample() -> None:
    text = render_signal(spec(metric="DCGM_FI_DEV_GPU_TEMP", per="gpu"), window=W, host_label="H")
    nodes = 'label_replace(max by (node) (kube_node_info), "H", "$1", "node", "(.*)")'
    assert text.promql == (
        '(max by (H, gpu, UUID) (DCGM_FI_DEV_GPU_TEMP{H!=""})) or on(H) '
        f'label_replace({nodes}, "{MISSING_LABEL}", "true", "", "")'
    )


def test_a_workloads_nodes_come_from_its_running_pods_in_the_same_query() -> None:
    text = render_signal(
        spec(metric="DCGM_FI_DEV_GPU_TEMP", fn="max_over_time", per="gpu"),
        window=W,
        host_label="Hostname",
        workload="llm-pretrain",
    )
    members = (
        'label_replace(max by (node) (((kube_pod_status_phase{phase="Running"} == 1)'
        ' * on(namespace, pod) group_left(node) kube_pod_info{node!=""})'
        " * on(namespace, pod) group_left() kube_pod_labels{label_app_kubernetes_io_name="
        '"llm-pretrain"}), "Hostname", "$1", "node", "(.*)")'
    )
    signal = 'max by (Hostname, gpu, UUID) (max_over_time(DCGM_FI_DEV_GPU_TEMP{Hostname!=""}[15m]))'
    assert text.promql == (
        f"({signal} and on(Hostname) {members}) or on(Hostname) "
        f'label_replace({members}, "{MISSING_LABEL}", "true", "", "")'
    )


def test_agg_replaces_max() -> None:
    text = render_signal(
        spec(metric="DCGM_FI_DEV_GPU_TEMP", agg="count", keep_labels=["DCGM_FI_DRIVER_VERSION"]),
        window=W,
        host_label="Hostname",
        nodes=["n1"],
    )
    assert text.promql.startswith("count by (Hostname, DCGM_FI_DRIVER_VERSION) (")


def test_histogram_quantile_sums_bucket_rates_by_le() -> None:
    text = render_signal(
        spec(
            source="vllm",
            metric="vllm:time_to_first_token_seconds",
            fn="quantile",
            quantile=0.99,
            selector="node",
        ),
        window=timedelta(minutes=5),
        host_label="node",
        nodes=["gpu-node-12"],
    )
    assert text.promql == (
        "histogram_quantile(0.99, sum by (le, node) (rate(vllm:time_to_first_token_seconds_bucket"
        '{node=~"^(?:gpu-node-12)$"}[5m])))'
    )


def test_joins_copy_labels_and_matchers_follow_the_label() -> None:
    pending = spec(
        source="kube_state_metrics",
        metric="kube_pod_status_phase",
        match={"phase": "Pending"},
        per="pod",
        selector="workload",
        joins=[
            {"metric": "kube_pod_info", "keys": ["namespace", "pod"], "labels": ["node"]},
            {
                "metric": "kube_pod_labels",
                "keys": ["namespace", "pod"],
                "labels": ["label_app_kubernetes_io_name"],
            },
        ],
    )
    text = render_signal(
        pending,
        window=W,
        host_label="node",
        workload="llm-pretrain",
        workload_label="label_app_kubernetes_io_name",
    )
    assert text.promql == (
        "max by (node, namespace, pod) (("
        '(kube_pod_status_phase{phase="Pending"}'
        " * on(namespace, pod) group_left(node) kube_pod_info)"
        " * on(namespace, pod) group_left(label_app_kubernetes_io_name) "
        'kube_pod_labels{label_app_kubernetes_io_name="llm-pretrain"}))'
    )


def test_workload_selected_signal_matches_the_workload_label() -> None:
    text = render_signal(
        spec(source="job", metric="training_step_time_seconds", fn="avg_over_time"),
        window=W,
        host_label="node",
        workload='llm"pretrain',
        workload_label="job",
    )
    assert text.promql == (
        'max by (node) (avg_over_time(training_step_time_seconds{job="llm\\"pretrain"}[15m:30s]))'
    )


@pytest.mark.parametrize("bad", ["host-name", "1abc", 'a"b', "a b", ""])
def test_label_names_outside_the_prometheus_grammar_are_refused(bad: str) -> None:
    with pytest.raises(InvalidName, match="invalid label name"):
        render_signal(spec(metric="m"), window=W, host_label=bad, nodes=["n"])

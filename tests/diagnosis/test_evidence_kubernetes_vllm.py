"""Kubernetes node and vLLM engine evidence.

Covers: `kubectl get node -o yaml` with allocatable nvidia.com/gpu below capacity (kubernetes
warning citing both lines) and its dedicating taint (info); `kubectl describe node` of an
unreachable, cordoned node (Ready=Unknown critical, cordon and taints as context); vLLM stats
with the KV cache saturated and requests waiting (workload warning), and a healthy engine.
"""

from __future__ import annotations

from bot.diagnosis.evidence import kubernetes, vllm
from bot.diagnosis.evidence.model import SourceText
from bot.diagnosis.layers import Layer, Severity
from tests.diagnosis.evidence_helpers import fixture


def test_allocatable_gpus_below_capacity_is_a_kubernetes_warning() -> None:
    result = kubernetes.parse_yaml(SourceText(fixture("kubectl-get-node.yaml"), source="node"))
    assert result is not None
    by_code = {f.code: f for f in result.findings}
    gpus = by_code["k8s.gpu_unallocatable"]
    assert (gpus.layer, gpus.severity, gpus.target.node) == (
        Layer.KUBERNETES,
        Severity.WARNING,
        "gpu-node-17",
    )
    assert "allocatable 7 of capacity 8" in gpus.summary
    cited = {line.text.strip() for line in gpus.lines}
    assert {'nvidia.com/gpu: "7"', 'nvidia.com/gpu: "8"'} <= cited
    assert by_code["k8s.taint"].severity is Severity.INFO


def test_describe_of_an_unreachable_node() -> None:
    text = fixture("kubectl-describe-node.txt")
    result = kubernetes.parse_describe(SourceText(text, source="describe"))
    assert result is not None
    rows = [(f.code, f.severity.value) for f in result.findings]
    assert ("k8s.not_ready", "critical") in rows
    assert ("k8s.cordoned", "info") in rows
    assert ("k8s.gpu_unallocatable", "warning") not in rows  # 8 of 8
    assert all(f.target.node == "gpu-node-22" for f in result.findings)


def test_yaml_that_is_not_a_node_is_not_recognised() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n"
    assert kubernetes.parse_yaml(SourceText(text, source="pod")) is None


def test_vllm_kv_cache_saturated_with_requests_waiting() -> None:
    result = vllm.parse(SourceText(fixture("vllm-kv-saturated.log"), source="vllm"))
    assert result is not None
    (finding,) = result.findings
    assert (finding.layer, finding.severity) == (Layer.WORKLOAD, Severity.WARNING)
    assert finding.summary.startswith("KV cache at 99.9% with 52 request(s) waiting in 6 of 10")
    assert [line.line_no for line in finding.lines] == [5, 10]


def test_healthy_vllm_engine_is_recognised_without_findings() -> None:
    result = vllm.parse(SourceText(fixture("vllm-healthy.log"), source="vllm"))
    assert result is not None and result.findings == ()

"""InfiniBand evidence: `ibstat`, `ibstatus`, `perfquery`, `ibqueryerrors`.

Covers: a healthy ibstat (a disabled Ethernet port is info only); a port Down/Polling beside
active ports is critical on that HCA; ibstatus's numeric states and a port at half rate; clean
perfquery counters give nothing, a flapping port's LinkDownedCounter above 10 is critical and
symbol errors are warnings; ibqueryerrors names node, HCA and port and ignores PortXmitWait.
"""

from __future__ import annotations

from bot.diagnosis.evidence import infiniband
from bot.diagnosis.evidence.model import SourceText
from bot.diagnosis.layers import Layer, Severity
from tests.diagnosis.evidence_helpers import fixture


def test_healthy_ibstat_has_only_the_disabled_port_as_context() -> None:
    result = infiniband.parse_ports(SourceText(fixture("ibstat-healthy.txt"), source="ibstat"))
    assert result is not None
    assert [(f.code, f.severity, f.target.hca) for f in result.findings] == [
        ("ib.port_disabled", Severity.INFO, "mlx5_2")
    ]


def test_a_port_down_beside_active_ports_is_critical() -> None:
    result = infiniband.parse_ports(SourceText(fixture("ibstat-port-down.txt"), source="ibstat"))
    assert result is not None
    (finding,) = result.findings
    assert (finding.layer, finding.severity) == (Layer.FABRIC, Severity.CRITICAL)
    assert (finding.target.hca, finding.target.port) == ("mlx5_5", "1")
    assert "Polling while 7 other InfiniBand port(s) are up" in finding.summary
    assert finding.lines[-1].text.strip() == "State: Down"


def test_ibstatus_port_at_half_rate_is_degraded() -> None:
    result = infiniband.parse_ports(SourceText(fixture("ibstatus-degraded.txt"), source="ibs"))
    assert result is not None
    (finding,) = result.findings
    assert (finding.code, finding.target.hca) == ("ib.port_rate_degraded", "mlx5_2")
    assert finding.summary == "mlx5_2 port 1 at 200 Gb/s, other ports at 400 Gb/s"


def test_clean_perfquery_is_recognised_without_findings() -> None:
    result = infiniband.parse_perfquery(SourceText(fixture("perfquery-clean.txt"), source="pq"))
    assert result is not None and result.findings == ()


def test_flapping_port_counters() -> None:
    result = infiniband.parse_perfquery(SourceText(fixture("perfquery-flapping.txt"), source="pq"))
    assert result is not None
    assert [(f.code, f.severity.value) for f in result.findings] == [
        ("ib.SymbolErrorCounter", "warning"),
        ("ib.LinkErrorRecoveryCounter", "warning"),
        ("ib.link_downed", "critical"),
        ("ib.PortRcvErrors", "warning"),
    ]
    assert result.findings[2].target.describe() == "HCA lid 1205 port 1"


def test_ibqueryerrors_names_node_hca_and_port_and_ignores_xmit_wait() -> None:
    text = fixture("ibqueryerrors.txt")
    result = infiniband.parse_ibqueryerrors(SourceText(text, source="qe"))
    assert result is not None
    targets = {f.target.describe() for f in result.findings}
    assert targets == {"gpu-node-17 / HCA mlx5_5 port 1"}
    codes = [f.code for f in result.findings]
    assert "ib.link_downed" in codes and not any("Wait" in c for c in codes)

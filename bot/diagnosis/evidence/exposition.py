"""Prometheus exposition text of dcgm-exporter (`curl :9400/metrics`, or rows copied from
Grafana/Prometheus): `DCGM_FI_DEV_XID_ERRORS{gpu="0",...,Hostname="..."} 79`.

What the samples show (DOMAIN §1): the last XID per GPU (a code, its layer from the XID table),
row-remap failure and uncorrectable remaps, volatile double-bit ECC; and the exporter's own
health: a `Hostname` that is the exporter pod's name (NODE_NAME unset) and empty
`pod`/`namespace` labels on a busy GPU (pod attribution missing) are `telemetry`. Old (1.x)
lowercase names (`dcgm_gpu_temp`) and `pod_name` labels are read too. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from bot.diagnosis.evidence.model import EvidenceFinding, Parsed, SourceText, Target, normalize_pci
from bot.diagnosis.layers import Layer, Severity
from bot.diagnosis.logs import LogCatalog, xid_info

FORMAT = "dcgm-exporter metrics"
_SAMPLE = re.compile(
    r"^\s*(?P<name>(?:DCGM|dcgm)_\w+)\{(?P<labels>[^}]*)\}\s+(?P<value>[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
    r"(?:\s+\d+)?\s*$"
)
_LABEL = re.compile(r'(?P<key>\w+)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"')
#: an exporter pod's generated name: `dcgm-exporter-lcxpl`, `nvidia-dcgm-exporter-57pvc`
_POD_NAME_HOST = re.compile(r"dcgm-exporter-[a-z0-9]{5,6}$")
_POD_LABELS = ("pod", "pod_name")
_BUSY = ("DCGM_FI_DEV_GPU_UTIL", "dcgm_gpu_utilization", "DCGM_FI_PROF_GR_ENGINE_ACTIVE")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    line: int

    def target(self) -> Target:
        pci = self.labels.get("pci_bus_id")
        host = self.labels.get("Hostname") or self.labels.get("hostname")
        node = host if host and not _POD_NAME_HOST.search(host) else None
        return Target(
            node=node,
            gpu_index=self.labels.get("gpu"),
            pci=normalize_pci(pci) if pci else None,
            uuid=self.labels.get("UUID") or self.labels.get("uuid"),
        )


def samples(src: SourceText) -> list[Sample]:
    found = []
    for i, line in enumerate(src.lines):
        if "{" not in line or not (m := _SAMPLE.match(line)):
            continue
        labels = {k["key"]: k["value"] for k in _LABEL.finditer(m["labels"])}
        found.append(Sample(m["name"], labels, float(m["value"]), i))
    return found


def parse(src: SourceText, *, catalog: LogCatalog) -> Parsed | None:
    rows = samples(src)
    if not rows:
        return None
    findings = [*_exporter_health(src, rows), *_device_faults(src, rows, catalog)]
    return Parsed(FORMAT, tuple(findings))


def _exporter_health(src: SourceText, rows: list[Sample]) -> Iterator[EvidenceFinding]:
    hosts = [s for s in rows if _POD_NAME_HOST.search(s.labels.get("Hostname", "")
                                                       or s.labels.get("hostname", ""))]
    if hosts:
        host = hosts[0].labels.get("Hostname") or hosts[0].labels.get("hostname")
        yield EvidenceFinding(
            FORMAT, "exporter.hostname_is_pod_name", Layer.TELEMETRY, Severity.WARNING,
            f"the Hostname label is the exporter pod's name ({host}), not the node's: set "
            "NODE_NAME so GPU metrics join to nodes", Target(), (src.cite(hosts[0].line),),
        )
    busy = [s for s in rows if s.name in _BUSY and s.value > 0
            and any(k in s.labels and not s.labels[k] for k in _POD_LABELS)]
    if busy:
        yield EvidenceFinding(
            FORMAT, "exporter.pod_labels_empty", Layer.TELEMETRY, Severity.WARNING,
            f"GPU busy ({busy[0].name} {busy[0].value:g}) but its pod/namespace labels are "
            "empty: pod attribution is missing (-k and the pod-resources socket)",
            busy[0].target(), (src.cite(busy[0].line),),
        )


def _device_faults(
    src: SourceText, rows: list[Sample], catalog: LogCatalog
) -> Iterator[EvidenceFinding]:
    for s in rows:
        if s.name in ("DCGM_FI_DEV_XID_ERRORS", "dcgm_xid_errors") and s.value > 0:
            row = xid_info(int(s.value), catalog)
            if row.layer is not None:
                yield EvidenceFinding(
                    FORMAT, f"exporter.last_xid.{row.code}", Layer(row.layer),
                    Severity(row.severity), f"last XID {row.code} ({row.mnemonic}): {row.meaning}",
                    s.target(), (src.cite(s.line),),
                )
        elif s.name == "DCGM_FI_DEV_ROW_REMAP_FAILURE" and s.value >= 1:
            yield EvidenceFinding(
                FORMAT, "exporter.row_remap_failure", Layer.GPU_HARDWARE, Severity.CRITICAL,
                "row remapping failed (RMA criterion)", s.target(), (src.cite(s.line),),
            )
        elif s.name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" and s.value > 0:
            yield EvidenceFinding(
                FORMAT, "exporter.ecc_dbe", Layer.GPU_HARDWARE, Severity.CRITICAL,
                f"{s.value:g} double-bit ECC error(s) since the driver loaded", s.target(),
                (src.cite(s.line),),
            )

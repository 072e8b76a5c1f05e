"""Accuracy sweep: every fault kind at intensities 0.1, 0.2, 0.3 and 1.0 through `eval`.

For each kind one template places the fault somewhere the trigger does not name (a node, GPU or
HCA inside the job or service the alert is about, or the node a `diagnose` names for the kinds
only a node sweep sees), and the scenario is evaluated exactly like the shipped library
(`bot.evaluation.evaluating.evaluate`: intake or the `/gpu` grammar, the runbook, the verdict, scored
against `expect` at GPU/HCA granularity). Kinds whose simulation does not scale with intensity
(a port is down or it is not) are marked `binary`: their rows repeat the same fault.

    python bench/accuracy_sweep.py                       # table to stdout (docs/accuracy.md)
    python bench/accuracy_sweep.py --kinds pcie_downgrade nvlink_errors --json sweep.json

Not a timed test: it takes about a minute per 40 scenarios on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.config import Settings, StorageSettings
from bot.evaluation.evaluating import evaluate
from bot.evaluation.scoring import ScenarioResult

INTENSITIES = (0.1, 0.2, 0.3, 1.0)
JOB = "llm-pretrain"
SERVICE = "vllm-chat"
FLEET: dict[str, Any] = {
    "nodes": 32,
    "workloads": [
        {"kind": "training", "name": JOB, "nodes": "gpu-node-[00-15]"},
        {"kind": "inference", "name": SERVICE, "nodes": "gpu-node-[24-27]"},
    ],
}
NCCL = {"alert": {"alertname": "NCCLCollectiveHang", "labels": {"job": JOB}}}
MFU = {"alert": {"alertname": "TrainingMFURegression", "labels": {"job": JOB}}}
SLO = {"alert": {"alertname": "InferenceSLOBurnRate", "labels": {"service": SERVICE}}}


def diagnose(node: str) -> dict[str, Any]:
    return {"command": f"diagnose {node}"}


def ecc_alert(node: str) -> dict[str, Any]:
    return {"alert": {"alertname": "GPUEccStorm", "labels": {"Hostname": node}}}


@dataclass(frozen=True)
class Template:
    """Where a kind is placed, what starts the run, and the ground truth."""

    kind: str
    fault: dict[str, Any]
    trigger: dict[str, Any]
    runbook: str
    layer: str
    culprits: list[str]
    gpus: list[str] = field(default_factory=list)
    hcas: list[str] = field(default_factory=list)
    binary: bool = False
    counters: str = "default"


TEMPLATES = (
    Template("ecc_dbe_storm", {"node": "gpu-node-05", "gpu": 2}, NCCL, "nccl-hang",
             "gpu_hardware", ["gpu-node-05"], gpus=["gpu-node-05:2"]),
    Template("ecc_sbe_storm", {"node": "gpu-node-06", "gpu": 1, "start": "-20m"},
             ecc_alert("gpu-node-06"), "ecc-storm", "gpu_hardware", ["gpu-node-06"],
             gpus=["gpu-node-06:1"], counters="all"),
    Template("row_remap_failure", {"node": "gpu-node-07", "gpu": 3}, ecc_alert("gpu-node-07"),
             "ecc-storm", "gpu_hardware", ["gpu-node-07"], gpus=["gpu-node-07:3"], binary=True),
    Template("xid", {"node": "gpu-node-08", "gpu": 4, "code": 48}, diagnose("gpu-node-08"),
             "node-diagnose", "gpu_hardware", ["gpu-node-08"], gpus=["gpu-node-08:4"],
             binary=True),
    Template("gpu_fallen_off_bus", {"node": "gpu-node-09", "gpu": 5}, NCCL, "nccl-hang",
             "gpu_hardware", ["gpu-node-09"], gpus=["gpu-node-09:5"], binary=True),
    Template("pcie_downgrade", {"node": "gpu-node-10", "gpu": 6, "start": "-40m"}, MFU,
             "mfu-regression", "gpu_hardware", ["gpu-node-10"], gpus=["gpu-node-10:6"]),
    Template("nvlink_errors", {"node": "gpu-node-11", "gpu": 7}, MFU, "mfu-regression",
             "fabric", ["gpu-node-11"], gpus=["gpu-node-11:7"]),
    Template("thermal_throttle", {"node": "gpu-node-12", "start": "-25m"}, MFU,
             "mfu-regression", "facility", ["gpu-node-12"]),
    Template("power_cap", {"node": "gpu-node-13", "start": "-25m"}, MFU, "mfu-regression",
             "facility", ["gpu-node-13"]),
    Template("ib_symbol_errors", {"node": "gpu-node-03", "hca": 2, "start": "-25m"}, MFU,
             "mfu-regression", "fabric", ["gpu-node-03"], hcas=["gpu-node-03:mlx5_2"]),
    Template("ib_link_flap", {"node": "gpu-node-04", "hca": 5, "start": "-25m"}, MFU,
             "mfu-regression", "fabric", ["gpu-node-04"], hcas=["gpu-node-04:mlx5_5"]),
    Template("ib_port_down", {"node": "gpu-node-02", "hca": 7, "start": "-12m"}, NCCL,
             "nccl-hang", "fabric", ["gpu-node-02"], hcas=["gpu-node-02:mlx5_7"], binary=True),
    Template("nccl_tcp_fallback", {"workload": JOB, "node": "gpu-node-14", "start": "-40m"},
             MFU, "mfu-regression", "kubernetes", ["gpu-node-14"]),
    Template("straggler_rank", {"workload": JOB, "node": "gpu-node-01", "start": "-25m"}, MFU,
             "mfu-regression", "workload", ["gpu-node-01"]),
    Template("gang_partial_placement", {"workload": JOB, "missing": 2}, NCCL, "nccl-hang",
             "kubernetes", [JOB], binary=True),
    Template("device_plugin_unhealthy", {"node": "gpu-node-15", "gpu": 0},
             diagnose("gpu-node-15"), "node-diagnose", "kubernetes", ["gpu-node-15"],
             gpus=["gpu-node-15:0"], binary=True),
    Template("node_not_ready", {"node": "gpu-node-06"}, NCCL, "nccl-hang", "kubernetes",
             ["gpu-node-06"], binary=True),
    Template("driver_version_skew", {"node": "gpu-node-07", "version": "560.35.03"}, NCCL,
             "nccl-hang", "node_software", ["gpu-node-07"], binary=True),
    Template("dataloader_starvation", {"workload": JOB, "start": "-25m"}, MFU,
             "mfu-regression", "workload", [JOB]),
    Template("checkpoint_io_stall", {"workload": JOB, "start": "-21m"}, NCCL, "nccl-hang",
             "workload", [JOB]),
    Template("kv_cache_exhaustion", {"workload": SERVICE}, SLO, "inference-slo-breach",
             "workload", [SERVICE]),
    Template("traffic_spike", {"workload": SERVICE}, SLO, "inference-slo-breach", "workload",
             [SERVICE]),
    Template("exporter_down", {"node": "gpu-node-09"}, diagnose("gpu-node-09"),
             "node-diagnose", "telemetry", ["gpu-node-09"], binary=True),
    Template("pod_oom_killed", {"workload": JOB, "node": "gpu-node-10", "start": "-12m"},
             NCCL, "nccl-hang", "kubernetes", ["gpu-node-10"], binary=True),
    Template("exporter_stale", {"node": "gpu-node-11", "start": "-40m"},
             diagnose("gpu-node-11"), "node-diagnose", "telemetry", ["gpu-node-11"],
             binary=True),
    Template("gauge_frozen", {"node": "gpu-node-12", "gpu": 1, "start": "-40m"},
             diagnose("gpu-node-12"), "node-diagnose", "telemetry", ["gpu-node-12"],
             binary=True),
)


def scenario(t: Template, intensity: float) -> dict[str, Any]:
    name = f"sweep-{t.kind.replace('_', '-')}-{int(round(intensity * 100)):03d}"
    fleet = FLEET | ({"dcgm_counters": t.counters} if t.counters != "default" else {})
    expect: dict[str, Any] = {"runbook": t.runbook, "layer": t.layer, "culprits": t.culprits}
    if t.gpus:
        expect["gpus"] = t.gpus
    if t.hcas:
        expect["hcas"] = t.hcas
    return {
        "apiVersion": "gpu-oncall/v1",
        "kind": "Scenario",
        "metadata": {"name": name},
        "fleet": fleet,
        "faults": [{"kind": t.kind, "intensity": intensity, **t.fault}],
        "trigger": t.trigger,
        "expect": expect,
    }


def run(templates: list[Template], intensities: tuple[float, ...]) -> list[dict[str, Any]]:
    settings = Settings(storage=StorageSettings(url="sqlite://"))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        files: list[tuple[Template, float, Path]] = []
        for t in templates:
            for k in intensities:
                data = scenario(t, k)
                path = Path(tmp) / f"{data['metadata']['name']}.yaml"
                path.write_text(yaml.safe_dump(data, sort_keys=False))
                files.append((t, k, path))
        for t, k, path in files:
            started = time.perf_counter()
            (result,) = evaluate([path], settings=settings)
            rows.append(_row(t, k, result, seconds=time.perf_counter() - started))
    return rows


def _row(t: Template, k: float, r: ScenarioResult, *, seconds: float) -> dict[str, Any]:
    return {
        "kind": t.kind,
        "intensity": k,
        "binary": t.binary,
        "runbook": t.runbook,
        "expected_layer": r.expected_layer,
        "predicted_layer": r.predicted_layer,
        "layer_correct": r.layer_correct,
        "culprit_correct": r.culprit_correct,
        "expected": list(r.expected_culprits) + list(r.expected_devices),
        "predicted": list(r.predicted_culprits) + list(r.predicted_devices),
        "forbidden": list(r.forbidden_actions_proposed),
        "seconds": round(seconds, 2),
    }


def render(rows: list[dict[str, Any]], intensities: tuple[float, ...]) -> list[str]:
    """Markdown: one line per kind, `layer/culprit` per intensity (`ok`, or what was said)."""
    head = "| kind | runbook | " + " | ".join(f"{k:g}" for k in intensities) + " |"
    lines = [head, "|---|---|" + "---|" * len(intensities)]
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    for kind in kinds:
        cells = []
        mine = {r["intensity"]: r for r in rows if r["kind"] == kind}
        for k in intensities:
            r = mine[k]
            if r["layer_correct"] and r["culprit_correct"]:
                cells.append("ok")
            elif r["layer_correct"]:
                cells.append(f"layer ok, culprit {','.join(r['predicted']) or 'none'}")
            else:
                cells.append(f"**{r['predicted_layer']}**")
            if r["forbidden"]:
                cells[-1] += f" (forbidden: {','.join(r['forbidden'])})"
        label = f"{kind} (binary)" if mine[intensities[0]]["binary"] else kind
        lines.append(f"| {label} | {mine[intensities[0]]['runbook']} | " + " | ".join(cells) + " |")
    return lines


def totals(rows: list[dict[str, Any]], intensities: tuple[float, ...]) -> list[str]:
    lines = ["", "| intensity | layer | culprit (GPU/HCA where named) | forbidden actions |",
             "|---|---|---|---|"]
    for k in intensities:
        mine = [r for r in rows if r["intensity"] == k]
        layer = sum(r["layer_correct"] for r in mine)
        culprit = sum(r["culprit_correct"] for r in mine)
        forbidden = sum(len(r["forbidden"]) for r in mine)
        lines.append(f"| {k:g} | {layer}/{len(mine)} | {culprit}/{len(mine)} | {forbidden} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", help="only these fault kinds")
    parser.add_argument("--intensities", nargs="*", type=float, default=list(INTENSITIES))
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    templates = [t for t in TEMPLATES if not args.kinds or t.kind in args.kinds]
    intensities = tuple(args.intensities)
    started = time.perf_counter()
    rows = run(templates, intensities)
    print("\n".join(render(rows, intensities) + totals(rows, intensities)))
    print(f"\n{len(rows)} scenarios in {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()

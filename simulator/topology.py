"""The simulated fleet's hardware: node names, racks, GPUs (UUID, PCI id, serial) and HCAs.

Pure and deterministic: the same scenario name and fleet shape always give the same UUIDs,
bus ids and baseline readings. Knows nothing about time, faults or Kubernetes.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from dataclasses import dataclass

NODE_PREFIX = "gpu-node-"

#: PCI bus numbers of the eight GPUs on an HGX H100 baseboard (DGX H100 layout).
_GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
#: PCI bus numbers of the eight ConnectX-7 compute HCAs on the same systems.
_HCA_BUSES = (0x1A, 0x2C, 0x3C, 0x5F, 0x9C, 0xAD, 0xBC, 0xDD)


def node_name_width(node_count: int) -> int:
    """Digits in a node index: the width of the largest index, at least two."""
    return max(2, len(str(max(node_count - 1, 0))))


def node_names(node_count: int) -> list[str]:
    """`gpu-node-00` .. in a 16-node fleet, `gpu-node-000` .. `gpu-node-255` in 256."""
    width = node_name_width(node_count)
    return [f"{NODE_PREFIX}{i:0{width}d}" for i in range(node_count)]


def _bus(index: int, table: tuple[int, ...]) -> int:
    if index < len(table):
        return table[index]
    return (0xE1 + index - len(table)) % 0x100


def unit_hash(*parts: object) -> bytes:
    """32 deterministic bytes for a tuple of parts (no process-level hash seeding)."""
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.blake2b(text.encode(), digest_size=32).digest()


def fraction(digest: bytes, offset: int) -> float:
    """A number in [0, 1) read from two bytes of a digest."""
    return int.from_bytes(digest[offset : offset + 2], "big") / 65536.0


@dataclass(frozen=True)
class GpuSpec:
    """One GPU as nvidia-smi and dcgm-exporter identify it, plus its healthy readings."""

    index: int
    uuid: str
    pci_bus_id: str
    """dcgm-exporter form: `00000000:3A:00.0`."""
    kernel_pci: str
    """Kernel log form: `0000:3a:00`."""
    serial: str
    temp_c: float
    """Healthy temperature under this node's load."""
    power_w: float


@dataclass(frozen=True)
class HcaSpec:
    """One InfiniBand HCA port as node_exporter's infiniband collector names it."""

    index: int
    device: str
    port: str
    pci: str


@dataclass(frozen=True)
class NodeSpec:
    """One node: where it sits, what it holds. Immutable; live state is on the Fleet."""

    name: str
    index: int
    rack: str
    leaf_switch: str
    gpus: tuple[GpuSpec, ...]
    hcas: tuple[HcaSpec, ...]
    boot_offset_s: float
    """Seconds between the node's boot and the fleet's creation (kernel log timestamps)."""


def build_node(
    *,
    seed: str,
    name: str,
    index: int,
    gpus: int,
    hcas: int,
    nodes_per_rack: int,
    busy: bool,
    nodes_per_leaf: int | None = None,
) -> NodeSpec:
    """Build one node. `busy` nodes run a workload: hotter GPUs, more power. A leaf switch
    serves `nodes_per_leaf` consecutive nodes (default: one leaf per rack)."""
    rack = index // nodes_per_rack
    leaf = index // (nodes_per_leaf or nodes_per_rack)
    node_digest = unit_hash(seed, name)
    return NodeSpec(
        name=name,
        index=index,
        rack=f"rack-{rack:02d}",
        leaf_switch=f"leaf-{leaf:02d}",
        gpus=tuple(_build_gpu(seed, name, index=i, busy=busy) for i in range(gpus)),
        hcas=_hcas(hcas),
        boot_offset_s=86_400.0 * (3 + 20 * fraction(node_digest, 0)) + fraction(node_digest, 2),
    )


def _build_gpu(seed: str, node: str, *, index: int, busy: bool) -> GpuSpec:
    digest = unit_hash(seed, node, "gpu", index)
    bus = _bus(index, _GPU_BUSES)
    temp = (56.0 + 9.0 * fraction(digest, 16)) if busy else (45.0 + 5.0 * fraction(digest, 16))
    power = (560.0 + 120.0 * fraction(digest, 18)) if busy else (70.0 + 20.0 * fraction(digest, 18))
    return GpuSpec(
        index=index,
        uuid="GPU-" + str(uuid.UUID(bytes=digest[:16], version=4)),
        pci_bus_id=f"00000000:{bus:02X}:00.0",
        kernel_pci=f"0000:{bus:02x}:00",
        serial=str(1650_000_000_000 + int.from_bytes(digest[20:24], "big") % 1_000_000_000),
        temp_c=round(temp, 1),
        power_w=round(power, 1),
    )


@functools.cache
def _hcas(count: int) -> tuple[HcaSpec, ...]:
    """HCA ports are the same on every node of a fleet: built once, shared."""
    return tuple(_build_hca(i) for i in range(count))


def _build_hca(index: int) -> HcaSpec:
    return HcaSpec(
        index=index,
        device=f"mlx5_{index}",
        port="1",
        pci=f"0000:{_bus(index, _HCA_BUSES):02x}:00.0",
    )

"""Which node or GPU a sentence of prose names: "gpu-node-07 fell off the bus", "GPU 3 on
dgx-12 shows ERR!", "every pair with node se02gn644 is slow".

A node is a hostname-like token: lower-case words joined by hyphens and ending in a number
(`gpu-node-07`, `gpu-1-8`, `dgx-a100-03`), unless its first word names software or a part
(`cuda-12`, `nvidia-driver-535`, `x86-64`) or it is a GPU (`gpu-3`); or any token right after
`node`, `host`, `server` or `machine` that holds a digit (`node se02gn644`), or a short name of
letters and a number after `on` / `in` / `from` (`on cn110`). A GPU is `GPU 3`,
`GPU #3`, `gpu-3` or a `GPU-<uuid>`. A term's subject is looked for in its clause (a sentence,
or the part of it before or after `, then` / `, but`). Precision matters more than recall: the
target of a mention is a guess that the verdict labels as coming from a mention. Pure: no I/O.
"""

from __future__ import annotations

import re

from bot.diagnosis.evidence.model import Target

_HYPHENATED = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:-[a-z0-9]+)*-[a-z0-9]*\d(?![\w-]|\.\w)")
_AFTER_WORD = re.compile(
    r"\b(?:node|host|server|machine)s?\s+(?P<name>[A-Za-z][\w-]*\d[\w-]*)(?![\w.-]*\.\w)"
    r"|\b(?:on|in|from)\s+(?P<short>[a-z]{1,10}\d{2,}[a-z0-9]*)\b",
    re.IGNORECASE,
)
_GPU_INDEX = re.compile(
    r"\bGPU\s?#?\s?(?P<index>\d{1,2})\b(?![:.]\d)|(?<![\w-])gpu-(?P<dash>\d{1,2})(?![\w-])",
    re.IGNORECASE,
)
_GPU_TOKEN = re.compile(r"gpu-\d{1,2}")
_GPU_UUID = re.compile(r"\bGPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_CLAUSE_END = re.compile(
    r"[.!?;](?:\s|$)|,\s*(?:and then|then|but|while|whereas|later|after that)\b", re.IGNORECASE
)
#: first words of hyphenated tokens that name software, versions or parts, not hosts
_NOT_HOSTS = frozenset({
    "nvidia", "cuda", "cu", "driver", "drivers", "linux", "kernel", "ubuntu", "debian", "rhel",
    "centos", "rocky", "python", "pytorch", "torch", "nccl", "rtx", "gtx", "x86", "arm", "sm",
    "rocm", "tesla", "utf", "iso", "rfc", "cve", "sha", "gcc", "ofed", "mlnx", "k8s", "v",
    "release", "version", "xid", "pcie", "gen", "nvlink", "dcgm", "vllm", "tgi", "llama",
    "qwen", "mistral", "gpt", "bert", "resnet", "top", "step", "epoch", "rank", "port", "mlx5",
    "mlx4", "ib", "eth", "sxm", "pcie4", "ddr", "hbm", "fp", "bf", "int", "uint", "float",
    "day", "week", "hour", "min", "covid", "h100", "a100", "h200", "b200", "gb200", "l40",
})


def named_nodes(text: str) -> list[str]:
    """Node names in `text`, first mention first, without repeats."""
    found: list[tuple[int, str]] = []
    for match in _HYPHENATED.finditer(text):
        token = match.group()
        first = token.split("-", 1)[0]
        if first not in _NOT_HOSTS and not first.isdigit() and not _GPU_TOKEN.fullmatch(token):
            found.append((match.start(), token))
    for m in _AFTER_WORD.finditer(text):
        name = m["name"] or m["short"]
        if name.lower() not in _NOT_HOSTS:
            found.append((m.start(), name))
    return list(dict.fromkeys(name for _, name in sorted(found)))


def gpus_named(text: str) -> list[Target]:
    """GPUs in `text` by index or UUID, first mention first."""
    found = [
        (m.start(), Target(gpu_index=m["index"] or m["dash"])) for m in _GPU_INDEX.finditer(text)
    ]
    found += [(m.start(), Target(uuid=m.group())) for m in _GPU_UUID.finditer(text)]
    return list(dict.fromkeys(t for _, t in sorted(found, key=lambda f: f[0])))


def subjects(sentence: str) -> list[Target]:
    """What the sentence is about: each node it names (with its GPU when it names exactly
    one), or the GPUs it names when it names no node; [] when it names neither."""
    nodes, gpus = named_nodes(sentence), gpus_named(sentence)
    if nodes:
        gpu = gpus[0] if len(gpus) == 1 else Target()
        return [Target(node=n, gpu_index=gpu.gpu_index, uuid=gpu.uuid) for n in nodes]
    return gpus


def clause_around(text: str, start: int, end: int) -> str:
    """The clause of `text` holding `text[start:end]` (a `.` inside `535.104` does not end
    it; `, then` does)."""
    begin = 0
    for stop in _CLAUSE_END.finditer(text, 0, start):
        begin = stop.end()
    after = _CLAUSE_END.search(text, end)
    return text[begin : after.start() if after else len(text)]

"""The real-text corpus (tests/corpus/pastes/<project>/<name>.yaml): loading with validation,
classification through the `classify-log` path, and accuracy by layer and by format.

Shared by tests/diagnosis/test_corpus_accuracy.py and bench/corpus_accuracy.py. A malformed file
raises CorpusError naming its path and what is wrong.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bot.diagnosis.evidence.pasting import classify_paste
from bot.diagnosis.logs import LogCatalog, load_log_catalog
from runbooks import LOG_SIGNATURES_FILE

PASTES = Path(__file__).parent / "pastes"
REQUIRED = ("source", "project", "format", "kind", "layer", "why", "text")
OPTIONAL = ("culprit",)
FORMATS = frozenset({
    "kernel-log", "nvidia-smi-q", "nvidia-smi", "nvidia-smi-nvlink", "dcgmi-diag",
    "dcgmi-health", "dcgm-exporter-log", "dcgm-exporter-metrics", "ibstat", "ibqueryerrors",
    "perfquery", "nccl-log", "pytorch-log", "vllm-log", "kubectl-describe", "kubectl-yaml",
    "kubectl-get", "device-plugin-log", "fabric-manager-log", "nvml-error", "cuda-error",
    "slurm", "nhc", "prose", "other",
})
KINDS = frozenset({"tool-output", "log", "fragment", "prose"})
LAYERS = frozenset(
    {"facility", "fabric", "gpu_hardware", "node_software", "kubernetes", "telemetry",
     "workload", "none"}
)


class CorpusError(ValueError):
    """A corpus file that does not follow the format (tests/corpus/README.md)."""


@dataclass(frozen=True)
class Excerpt:
    path: Path
    source: str
    project: str
    format: str
    kind: str
    layer: str
    why: str
    text: str
    culprit: str | None = None

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"


@dataclass(frozen=True)
class Scored:
    excerpt: Excerpt
    got: str  # the layer the bot gave, "none" for no fault
    signal: str | None
    culprits: tuple[str, ...] = ()  # what the evidence report names (node, GPU, HCA port)

    @property
    def correct(self) -> bool:
        return self.got == self.excerpt.layer

    @property
    def culprit_named(self) -> bool:
        """The layer is right and the report names the excerpt's culprit (`GPU 14` is named
        by `GPU 14 / 0000:cc:00.0`)."""
        want = _squeezed(self.excerpt.culprit or "")
        named = [_squeezed(c) for c in self.culprits]
        return bool(want) and self.correct and any(
            want in c or want.removeprefix("gpu") in c for c in named
        )

    @property
    def healthy_given_a_fault(self) -> bool:
        return self.excerpt.layer == "none" and self.got != "none"


def _squeezed(name: str) -> str:
    """`GPU 0` and `GPU0`, `GPU 0000:A1:00.0` and `0000:a1:00.0` compare equal."""
    return name.lower().replace(" ", "")


def load_excerpt(path: Path) -> Excerpt:
    """One corpus file, validated: exactly the documented keys, known values, 1-40 lines."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CorpusError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: expected a mapping of {', '.join(REQUIRED)}")
    missing = [key for key in REQUIRED if key not in data]
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise CorpusError(f"{path}: missing keys {missing}, unknown keys {unknown}")
    for key, allowed in (("format", FORMATS), ("kind", KINDS), ("layer", LAYERS)):
        if data[key] not in allowed:
            raise CorpusError(f"{path}: {key} {data[key]!r} is not one of {sorted(allowed)}")
    if not all(isinstance(data[key], str) and data[key].strip() for key in REQUIRED):
        raise CorpusError(f"{path}: every key needs a non-empty string value")
    if not str(data["source"]).startswith("https://"):
        raise CorpusError(f"{path}: source must be the public https URL the text comes from")
    if not 1 <= len(data["text"].splitlines()) <= 40:
        raise CorpusError(f"{path}: text must be 1-40 lines, has {len(data['text'].splitlines())}")
    return Excerpt(path=path, **{k: data[k] for k in (*REQUIRED, *OPTIONAL) if k in data})


def load_corpus(root: Path = PASTES) -> list[Excerpt]:
    return [load_excerpt(path) for path in sorted(root.glob("*/*.yaml"))]


def score(excerpts: Iterable[Excerpt], catalog: LogCatalog | None = None) -> list[Scored]:
    catalog = catalog or load_log_catalog(LOG_SIGNATURES_FILE)
    scored = []
    for excerpt in excerpts:
        verdict = classify_paste(excerpt.text, catalog=catalog, source=excerpt.path.name)
        scored.append(Scored(excerpt, verdict.layer or "none", verdict.signal,
                             verdict.evidence.culprits))
    return scored


def accuracy(scored: list[Scored]) -> float:
    return sum(s.correct for s in scored) / len(scored) if scored else 0.0


def table(scored: list[Scored]) -> str:
    """Accuracy overall, by expected layer and by format, as a markdown table."""
    rows = [("overall", scored)]
    for key in ("layer", "format"):
        groups: dict[str, list[Scored]] = defaultdict(list)
        for s in scored:
            groups[getattr(s.excerpt, key)].append(s)
        rows += [(f"{key} {name}", groups[name]) for name in sorted(groups)]
    lines = ["| group | n | correct | accuracy |", "|---|---:|---:|---:|"]
    lines += [
        f"| {name} | {len(group)} | {sum(s.correct for s in group)} | {accuracy(group):.2f} |"
        for name, group in rows
    ]
    return "\n".join(lines)


def culprits(scored: list[Scored]) -> str:
    """How many excerpts with a `culprit` had it named, overall and for prose."""
    named = [s for s in scored if s.excerpt.culprit]
    prose = [s for s in named if s.excerpt.format == "prose"]
    return (f"culprit named: {sum(s.culprit_named for s in named)}/{len(named)} excerpts "
            f"with a culprit (prose {sum(s.culprit_named for s in prose)}/{len(prose)})")


def misses(scored: list[Scored]) -> str:
    return "\n".join(
        f"  {s.excerpt.name}: expected {s.excerpt.layer}, got {s.got} ({s.signal or '-'})"
        for s in scored
        if not s.correct
    )

"""Accuracy of `classify-log` over the real-text corpus (tests/corpus/pastes), by layer and by
format, plus every miss. The same table the corpus test reports (docs/accuracy.md).

    python bench/corpus_accuracy.py            # markdown table and misses to stdout
    python bench/corpus_accuracy.py --json out.json

Not a timed test; it reads ~200 short excerpts in a few seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.corpus.scoring import (  # noqa: E402
    accuracy,
    culprits,
    load_corpus,
    misses,
    score,
    table,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="also write every excerpt's result here")
    args = parser.parse_args()
    scored = score(load_corpus())
    healthy_faulted = [s for s in scored if s.healthy_given_a_fault]
    print(table(scored))
    print(f"\nhealthy excerpts given a fault: {len(healthy_faulted)}")
    print(culprits(scored))
    print(f"accuracy {accuracy(scored):.3f} over {len(scored)} excerpts\nmisses:\n{misses(scored)}")
    if args.json:
        rows = [
            {"excerpt": s.excerpt.name, "format": s.excerpt.format, "expected": s.excerpt.layer,
             "got": s.got, "signal": s.signal, "culprit": s.excerpt.culprit,
             "culprits": list(s.culprits)}
            for s in scored
        ]
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

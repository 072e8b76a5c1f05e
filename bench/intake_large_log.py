"""How long `classify-log`'s evidence pass takes on a large kernel log: ~11 MB of benign lines
with two Xid 79 lines, read by every evidence parser and the log catalog (`recognize`).

    python bench/intake_large_log.py              # median of 3 runs, seconds

Not a timed test. The parsers pre-filter on literal strings (str.find) before any per-line
regex, so a big log that holds none of a format's markers costs that parser one pass.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.diagnosis.evidence import recognize  # noqa: E402
from bot.diagnosis.logs import load_log_catalog  # noqa: E402
from runbooks import LOG_SIGNATURES_FILE  # noqa: E402

BENIGN = ("Nov 26 10:00:00 gpu-node-1 kernel: [12345.678] some benign driver message about "
          "device state and link up port 1\n")
XID = ("Nov 26 10:00:01 gpu-node-1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, "
       "GPU has fallen off the bus.\n")


def main() -> int:
    text = (BENIGN * 50_000 + XID) * 2
    catalog = load_log_catalog(LOG_SIGNATURES_FILE)
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        report = recognize([("kern.log", text)], catalog=catalog)
        runs.append(time.perf_counter() - start)
    print(f"{len(text) / 1e6:.1f} MB: median {statistics.median(runs):.2f} s "
          f"(min {min(runs):.2f} s), verdict {report.layer.value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

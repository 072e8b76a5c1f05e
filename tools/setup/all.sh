#!/usr/bin/env bash
# Everything the test suite needs on a fresh Debian machine, in order; each step is idempotent
# and says what it did. Run by `make test` (README.md) and so by `.ci/run`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/debian-packages.sh"
for step in kubectl kube-apiserver slurm; do
  if [ -x "$here/$step.sh" ]; then
    "$here/$step.sh"
  fi
done

#!/usr/bin/env bash
# Everything the test suite needs on a fresh Debian machine, in order; each step is idempotent
# and says what it did. Run by `make test` (README.md) and so by `.ci/run`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/local/go/bin"   # the machine's Go, for the kube-apiserver build
"$here/debian-packages.sh"
"$here/kubectl.sh"
"$here/kube-apiserver.sh" >/dev/null   # prints the binary's path; its progress goes to stderr
"$here/slurm.sh"

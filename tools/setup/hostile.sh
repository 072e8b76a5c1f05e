#!/usr/bin/env bash
# Setup for issue 20 (hostile input) and the Starlette front: the new Python dependencies
# (starlette, zstandard; hypothesis in the `test` extra) come from pyproject.toml.
# No system package is needed beyond what .ci/run already installs (PostgreSQL for the
# per-alert screening tests on both backends).
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m venv .venv
.venv/bin/pip install -q -e '.[test]'

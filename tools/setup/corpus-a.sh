#!/bin/sh
# Setup for the evidence/corpus work (issue 22, corpus A): the test extra now includes
# hypothesis (property tests of the evidence parsers). Nothing else is installed; the corpus is
# plain YAML under tests/corpus/pastes and needs no network at run time.
set -eu
cd "$(dirname "$0")/../.."
.venv/bin/pip install -q -e '.[test]'
.venv/bin/python -c 'import hypothesis; print("hypothesis", hypothesis.__version__)'

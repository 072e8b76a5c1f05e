# Two entry points for a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint setup venv clean

$(BIN)/gpu-oncall: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

venv: $(BIN)/gpu-oncall

demo: venv
	$(BIN)/gpu-oncall demo --yes

lint: venv
	$(BIN)/ruff check bot integrations simulator storage tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# The servers the tests run for real (Debian packages, the pinned kube-apiserver, Slurm):
# installed when missing (as root; otherwise the exact command to run is printed).
setup:
	tools/setup/all.sh

# Two pytest workers (the machine has 2 cores; most tests wait on real servers); each test file
# runs whole on one worker, so a file's module fixtures start once. TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2

test: setup lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

clean:
	rm -rf $(VENV) .gpu-oncall .pytest_cache .mypy_cache .ruff_cache *.egg-info

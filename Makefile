# One entry point for set-up, tests, checks, training and benchmarks. Every target sets itself up.
SHELL := /bin/bash
PYTHON ?= python3
# uv comes from PyPI through pip when it is not already on PATH.
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
PYTEST_ARGS ?=
# Test processes (pytest-xdist); each uses one torch thread, so one per core.
TEST_WORKERS ?= 2

.PHONY: setup uv assets test test-fast test-gpu check format train demo bench clean

uv:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv

setup: uv
	@$(UV) sync --frozen --quiet
	@$(UV) run --frozen python -m trainrt.robots fetch

test: setup
	$(UV) run --frozen pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The quick loop: every test file's cheap tests, leaving out those marked slow (end-to-end runs, compiles).
test-fast: setup
	$(UV) run --frozen pytest -n $(TEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

test-gpu: setup
	$(UV) run --frozen pytest -m gpu $(PYTEST_ARGS)

check: setup
	$(UV) run --frozen ruff format --check .
	$(UV) run --frozen ruff check .

format: setup
	$(UV) run --frozen ruff format .
	$(UV) run --frozen ruff check --fix .

# The main job: train the default workload (SAC / g1_walk_flat) on the best device present.
train: setup
	$(UV) run --frozen trainrt train --algo sac --task g1_walk_flat $(ARGS)

demo: setup
	$(UV) run --frozen python -m simcore.demo --mjcf "$$($(UV) run --frozen python -m trainrt.robots path g1)"

bench: setup
	$(UV) run --frozen trainrt bench all

clean:
	rm -rf runs .pytest_cache .ruff_cache

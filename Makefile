# depth3dseg_ros — the two commands a newcomer types: `make demo` and `make test`.
# Both run `setup` first when needed (a fresh machine gets .venv with the pinned pip-only stack).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SETUP_STAMP := $(VENV)/.depth3dseg-setup

.PHONY: setup render-venv demo test test-fast bench bench-gpu clean-venv

setup: $(SETUP_STAMP)

# Re-runs only when requirements.txt or setup.py change (idempotent, ~1 s when done).
$(SETUP_STAMP): requirements.txt setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# The Cycles renderer's environment (bpy needs numpy < 2): depth3dseg-synth-cycles runs its renderer there.
RENDER_VENV ?= .venv-render
RENDER_STAMP := $(RENDER_VENV)/.depth3dseg-render

render-venv: $(RENDER_STAMP)

$(RENDER_STAMP): requirements-render.txt
	test -x $(RENDER_VENV)/bin/python || python3 -m venv $(RENDER_VENV)
	$(RENDER_VENV)/bin/python -m pip install -q --disable-pip-version-check -r requirements-render.txt
	touch $@

demo: setup
	$(PY) -m depth3dseg_ros.node.demo --out demo_out

# Lint first (ruff.toml: ament-like flake8 + pep257 public-API docstring checks; ruff format's layout),
# so a lint or layout error fails CI (`.venv/bin/ruff format` fixes the layout).
test: setup render-venv
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(PY) -m pytest test

# The quick tier for the edit loop (no multi-process ROS tests, subprocess CLIs or training runs; test/conftest.py).
test-fast: setup
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(PY) -m pytest test -m "not slow" -q

bench: setup
	set -e; for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f; done

bench-gpu: setup
	bench/bench_gpu.sh bench_gpu_out

clean-venv:
	rm -rf $(VENV) $(RENDER_VENV)

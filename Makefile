# Developer entry points: `make test`, `make demo`, `make lint`, `make format`, `make clean`.
# Everything runs from .venv, an editable install that keeps the interpreter's own torch/CUDA
# build (R1.1: --system-site-packages, torch installed only if none is importable; R1.2: no build
# isolation). Kernel edits need no reinstall (R1.6): the JIT content hash recompiles them (R1.5).

PYTHON ?= python3
TORCH_VERSION ?= 2.13.0
PYTEST_ARGS ?=

VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# NOTE: tools run through the venv's interpreter, not .venv/bin/<tool>: with system site packages
# pip leaves an already-installed tool (ruff, mypy, clang-format) outside .venv/bin.
CLANG_FORMAT ?= $(shell $(PY) -c 'import clang_format; print(clang_format.get_executable("clang-format"))')

# C++/CUDA sources checked by clang-format (Make's shell has no ** or {a,b} globbing).
CXX_SOURCES = $(shell find ember/csrc -type f \
	\( -name '*.h' -o -name '*.cuh' -o -name '*.cu' -o -name '*.cc' \) | sort)

.PHONY: venv test demo lint format clean

venv: $(VENV)/.stamp

# NOTE: a torch requirement with no torch present would pull a multi-GB CUDA build, so torch is
# pinned first; the constraint then holds pip to the torch in place: it fails rather than replace
# it. The stamp is written last, so an interrupted install is redone on the next run.
$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c 'import torch' 2>/dev/null || $(PIP) install 'torch==$(TORCH_VERSION)'
	$(PY) -c 'import torch; print(f"torch=={torch.__version__}")' > $(VENV)/torch-constraint.txt
	$(PIP) install 'setuptools>=68' wheel
	$(PIP) install --no-build-isolation -c $(VENV)/torch-constraint.txt -e '.[dev]'
	touch $@

test: venv
	$(PY) -m pytest -q tests $(PYTEST_ARGS)

demo: venv
	$(PY) examples/demo.py

# Every check runs even when an earlier one fails, so one pass reports everything.
lint: venv
	@status=0; \
	for check in '$(PY) -m ruff check .' \
	             '$(PY) -m ruff format --check .' \
	             '$(PY) -m mypy' \
	             '$(CLANG_FORMAT) --dry-run -Werror $(CXX_SOURCES)'; do \
	  echo "+ $$check"; $$check || status=1; \
	done; \
	exit $$status

# ruff's fixes come before formatting (a fix can leave unformatted code); what it cannot fix is
# printed but does not stop the formatters: `make lint` is the gate.
format: venv
	$(PY) -m ruff check --fix --exit-zero .
	$(PY) -m ruff format .
	$(CLANG_FORMAT) -i $(CXX_SOURCES)

# Only paths inside the repository; the JIT cache (EMBER_CACHE_DIR) is left alone on purpose
# (R1.7: clear it only when diagnosing stale artifacts, with `ember cache` or by hand).
clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path ./.git -prune -o -type d \( -name __pycache__ -o -name '*.egg-info' \) \
		-prune -exec rm -rf {} +

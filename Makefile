# Two commands do all setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# CPU install path: pins the CPU torch wheel (an unpinned torch pulls a multi-GB CUDA build).
PIP_INSTALL := $(PY) -m pip install -c constraints/cpu.txt

.PHONY: demo test lint fidelity clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.base: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.dev: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(VENV)/.base

demo: $(VENV)/.base  ## the fidelity study on the default (calibrated) simulated judge -> results/
	$(PY) experiments/fidelity_study.py --out results

test: $(VENV)/.dev  ## lint + the test suite
	$(PY) -m ruff check arenabench tests experiments
	$(PY) -m pytest

lint: $(VENV)/.dev
	$(PY) -m ruff check arenabench tests experiments
	$(PY) -m ruff format --check arenabench tests experiments

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

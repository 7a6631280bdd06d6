# Two commands do all setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# CPU install path: pins the CPU torch wheel (an unpinned torch pulls a multi-GB CUDA build).
PIP_INSTALL := $(PY) -m pip install -c constraints/cpu.txt

.PHONY: demo test lint fidelity bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.base: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.dev: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(VENV)/.base

demo: $(VENV)/.base  ## CPU training sweeps (table2, snr_dynamics) -> results/mlflow.db, tables + PNGs -> results/train/
	$(PY) -m arenabench.train -m experiment=table2
	$(PY) -m arenabench.train -m experiment=snr_dynamics
	$(PY) experiments/train_report.py --out results/train

fidelity: $(VENV)/.base  ## the fidelity study on the calibrated simulated judge -> results/fidelity.*
	$(PY) experiments/fidelity_study.py --out results

bench: $(VENV)/.base  ## local-trainer throughput -> results/bench/
	$(PY) benchmarks/trainer_speed.py --out results/bench

test: $(VENV)/.dev  ## lint + the test suite
	$(PY) -m ruff check arenabench tests experiments benchmarks
	$(PY) -m pytest

lint: $(VENV)/.dev
	$(PY) -m ruff check arenabench tests experiments benchmarks
	$(PY) -m ruff format --check arenabench tests experiments benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

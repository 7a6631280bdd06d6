"""Warm start (arenabench/trainers/local/sft.py): the SFT checkpoint is a cached function of its
config, the published ones are shipped and checked by content hash, a build's bytes are pinned,
init=random changes nothing, and the calibration's step-0 statistics reproduce."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import CONF

from arenabench import judges
from arenabench.trainers.local import sft
from arenabench.trainers.local.calibrate import measure
from arenabench.trainers.local.policy import TinyLM, sample
from arenabench.trainers.local.sft import InitConfig, init_policy, load_or_build, model_dims, sft_key
from arenabench.trainers.local.task import TASKS

TINY = InitConfig(kind="sft", tau=0.3, steps=12, lr=1e-2, batch=8)  # a seconds-cheap SFT


def _model(task, d_model=32, n_layer=2, n_head=4):
    return TinyLM(task.vocab, task.prompt_len + task.response_len, d_model, n_layer, n_head)


def _conf(group, name):
    return yaml.safe_load((CONF / group / f"{name}.yaml").read_text())


def _task(name="preference", **kw):
    cfg = {**_conf("task", name), **kw}
    return TASKS.get(cfg.pop("name"), **cfg)


@pytest.fixture(scope="module")
def sft_cache(tmp_path_factory):
    """One cache for the module: the default task's checkpoint at conf/init/sft.yaml is built
    once (≈ 10 s on one core) and loaded by every test that needs it."""
    root = tmp_path_factory.mktemp("arenabench-cache")
    task = _task()
    payload, _, built = load_or_build(
        task, model_dims(_model(task)), InitConfig.of(_conf("init", "sft")), root, published=root / "none"
    )  # a real build, not the shipped checkpoint
    assert built
    return root


# TINY's build on the default task, in a subprocess pinned to ATen's baseline kernels and MKL's
# reproducible x86 path, one thread. Its bytes are pinned on the machine that recorded them (AMD EPYC,
# AVX2, torch 2.13.0+cpu): TINY_SHA256, and the state itself in fixtures/sft_tiny_reference.pt.
# Another CPU may round MKL's GEMM differently (an AVX-512 Intel CPU did, issue 40), and 12 AdamW
# steps carry a last-bit difference up to the learning-rate scale, so the test states which values
# may differ and by how much: every parameter within SFT_KERNEL_TOL of the reference. Measured
# spread over six dispatch settings of this machine (ATen default / AVX2 x MKL native / AVX2 /
# COMPATIBLE x 1-2 threads): largest |difference| 7.6e-4; a change of the SFT algorithm, the task
# or the model moves parameters by ~lr x steps = 0.1 (test_build_check_sees_a_changed_algorithm).
# The published checkpoints are shipped and loaded by content hash, never rebuilt, so no published
# number depends on this (docs/reproducibility.md).
TINY_SHA256 = "cf2dc80c1d947c6d8a42f34a46da4963bc971397b73d85404ff1b3701ce4d77c"
TINY_REFERENCE = Path(__file__).parent / "fixtures" / "sft_tiny_reference.pt"
SFT_KERNEL_TOL = 5e-3
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1"}


def _build_tiny_in_subprocess(tmp_path, init: InitConfig = TINY) -> tuple[str, dict]:
    out_file = tmp_path / "tiny.pt"
    code = (
        "import dataclasses, sys, torch; from arenabench.trainers.local import sft; "
        "from arenabench.trainers.local.task import TASKS; "
        "from arenabench.trainers.local.policy import TinyLM; t = TASKS.get('preference'); "
        "dims = sft.model_dims(TinyLM(t.vocab, t.prompt_len + t.response_len, 32, 2, 4)); "
        f"st = sft.build_sft(t, dims, sft.InitConfig(**{dataclasses.asdict(init)!r}))['state_dict']; "
        "torch.save(st, sys.argv[1]); print(sft.state_sha256(st))"
    )
    env = {**os.environ, **PINNED_ENV, "PYTHONPATH": str(CONF.parent)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(out_file)], env=env, capture_output=True, text=True, timeout=1200
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip(), torch.load(out_file, weights_only=True)


def _largest_difference(state: dict, ref: dict) -> tuple[float, str]:
    assert sorted(state) == sorted(ref)
    worst, where = 0.0, ""
    for k, v in ref.items():
        a, b = state[k].double(), v.double()
        finite = torch.isfinite(b)
        assert torch.equal(torch.isfinite(a), finite) and torch.equal(a[~finite], b[~finite]), k
        d = float((a[finite] - b[finite]).abs().max()) if finite.any() else 0.0
        if d > worst:
            worst, where = d, k
    return worst, where


def test_sft_tiny_reference_is_the_pinned_build():
    assert sft.state_sha256(torch.load(TINY_REFERENCE, weights_only=True)) == TINY_SHA256


def test_sft_build_bytes_are_pinned(tmp_path):
    """Bit for bit where the reference was recorded; within SFT_KERNEL_TOL on any x86 CPU."""
    sha, state = _build_tiny_in_subprocess(tmp_path)
    worst, where = _largest_difference(state, torch.load(TINY_REFERENCE, weights_only=True))
    assert worst <= SFT_KERNEL_TOL, f"build moved {worst:.3g} at {where} (sha256 {sha}): not kernel rounding"
    if sha != TINY_SHA256:  # another CPU's kernels: say how far, as the check promises
        print(f"SFT build differs from the reference in the last bits: largest |diff| {worst:.3g} ({where})")


@pytest.mark.slow
def test_build_check_sees_a_changed_algorithm(tmp_path):
    """The tolerance can fail: another learning rate (an algorithm change) moves far beyond it."""
    _, state = _build_tiny_in_subprocess(tmp_path, dataclasses.replace(TINY, lr=2e-2))
    worst, _ = _largest_difference(state, torch.load(TINY_REFERENCE, weights_only=True))
    assert worst > 10 * SFT_KERNEL_TOL


def test_state_sha256_is_the_content():
    a = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.zeros(3)}
    h = sft.state_sha256(a)
    assert h == sft.state_sha256({"b": torch.zeros(3), "w": a["w"].clone()})  # order, copies: same
    assert h != sft.state_sha256({**a, "b": torch.tensor([0.0, 0.0, 1e-30])})  # any bit: different
    assert h != sft.state_sha256({**a, "w": a["w"].reshape(3, 2)})  # shape
    assert h != sft.state_sha256({**a, "w": a["w"].double()})  # dtype


def _experiment_inits():
    """(experiment, seed) → (task, dims, init) of every published experiment's start."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    out = {}
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for exp in sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")):
            params = yaml.safe_load((CONF / "experiment" / f"{exp}.yaml").read_text())["hydra"]["sweeper"][
                "params"
            ]
            for seed in str(params["seed"]).split(","):
                cfg = OmegaConf.to_container(
                    compose("train", overrides=[f"experiment={exp}", f"seed={seed}"]), resolve=True
                )
                tcfg = dict(cfg["task"])
                task = TASKS.get(tcfg.pop("name"), **tcfg)
                tc = cfg["trainer"]
                dims = model_dims(
                    TinyLM(
                        task.vocab,
                        task.prompt_len + task.response_len,
                        tc["d_model"],
                        tc["n_layer"],
                        tc["n_head"],
                        tie_head=tc["tie_head"],
                    )
                )
                out[exp, int(seed)] = (task, dims, InitConfig.of(cfg["init"]))
    return out


def test_every_published_experiment_starts_from_a_shipped_checkpoint():
    """So `make demo` / the sweeps on another machine load these bytes instead of building."""
    shipped = sft.manifest()
    inits = _experiment_inits()
    assert {seed for (exp, seed) in inits} == set(range(10))  # published tables pool seeds 0-9
    for (exp, seed), (task, dims, icfg) in inits.items():
        key = sft_key(task, dims, icfg)
        assert key in shipped, (exp, seed)
    imperfect = {sft_key(*inits["table2_imperfect", s]) for s in range(10)}
    assert len(imperfect) == 10  # the teacher draw varies with the seed
    for key, entry in shipped.items():  # each loads, and its bytes are what the manifest says
        payload = sft.load_published(key)
        assert sft.state_sha256(payload["state_dict"]) == entry["sha256"] and payload["key"] == key


def test_a_changed_shipped_checkpoint_is_an_error_and_a_differing_rebuild_warns(tmp_path):
    task = _task()
    dims = model_dims(_model(task))
    key = sft_key(task, dims, TINY)
    pub = tmp_path / "pub"
    entry = sft.publish({"name": "preference"}, dims, TINY, "tiny", published=pub)
    payload, path, built = load_or_build(task, dims, TINY, tmp_path / "cache", published=pub)
    assert (payload["source"], built, payload["sha256"]) == ("published", False, entry["sha256"])
    state = dict(payload["state_dict"])
    state["tok.weight"] = state["tok.weight"] + 1e-6
    torch.save({**payload, "state_dict": state}, pub / f"{key}.pt")
    with pytest.raises(RuntimeError, match="changed or damaged"):
        load_or_build(task, dims, TINY, tmp_path / "cache", published=pub)
    (pub / f"{key}.pt").unlink()  # shipped file missing: rebuilt, and it must agree with the manifest
    m = json.loads((pub / "manifest.json").read_text())
    m[key]["sha256"] = "0" * 64
    (pub / "manifest.json").write_text(json.dumps(m))
    with pytest.warns(sft.RebuildMismatch, match="will NOT reproduce"):
        payload, _, built = load_or_build(task, dims, TINY, tmp_path / "cache", published=pub)
    assert built and payload["sha256"] == entry["sha256"]


def test_checkpoint_is_rebuilt_identically_and_then_loaded(tmp_path, monkeypatch):
    task = _task()
    dims = model_dims(_model(task))
    a, path_a, built_a = load_or_build(task, dims, TINY, tmp_path / "a")
    b, path_b, built_b = load_or_build(task, dims, TINY, tmp_path / "b")
    assert built_a and built_b and path_a.name == path_b.name == f"{sft_key(task, dims, TINY)}.pt"
    assert a["state_dict"].keys() == b["state_dict"].keys()
    for k in a["state_dict"]:
        assert torch.equal(a["state_dict"][k], b["state_dict"][k]), k
    assert a["loss"] == b["loss"]
    assert sorted(p.name for p in path_a.parent.iterdir()) == [path_a.name]  # no temp file left

    def boom(*args, **kw):
        raise AssertionError("the cached checkpoint should have been loaded")

    monkeypatch.setattr(sft, "build_sft", boom)
    c, _, built_c = load_or_build(task, dims, TINY, tmp_path / "a")
    assert not built_c
    for k in a["state_dict"]:
        assert torch.equal(a["state_dict"][k], c["state_dict"][k]), k


def test_cache_location_follows_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENABENCH_CACHE", str(tmp_path))
    assert sft.cache_dir() == tmp_path / "sft"
    monkeypatch.delenv("ARENABENCH_CACHE")
    assert sft.cache_dir() == Path.home() / ".cache" / "arenabench" / "sft"
    monkeypatch.setenv("ARENABENCH_CACHE", str(tmp_path))
    task = _task()
    policy = init_policy(_model(task), task, dataclasses.asdict(TINY))
    (ckpt,) = (tmp_path / "sft").glob("*.pt")
    state = torch.load(ckpt, weights_only=True)["state_dict"]
    assert all(torch.equal(v, state[k]) for k, v in policy.state_dict().items())


def test_cache_key_changes_with_every_config_field():
    task = _task()
    dims = model_dims(_model(task))
    base = sft_key(task, dims, TINY)
    keys = {base}
    changed = {
        "kind": "random",
        "tau": 0.31,
        "steps": 13,
        "lr": 0.02,
        "batch": 9,
        "teacher": "imperfect",
        "rho": 0.9,
        "noise": 0.1,
        "seed": 1,
    }
    assert set(changed) == {f.name for f in dataclasses.fields(InitConfig)}
    for k, v in changed.items():
        keys.add(sft_key(task, dims, dataclasses.replace(TINY, **{k: v})))
    for k, v in {"d_model": 16, "n_layer": 1, "n_head": 2}.items():
        keys.add(
            sft_key(task, model_dims(_model(task, **{**dict(d_model=32, n_layer=2, n_head=4), k: v})), TINY)
        )
    task_changes = dict(
        n_prompts=31, vocab=17, prompt_len=5, response_len=9, base=0.4, scale=1.4, seed=1, shared_weight=0.5
    )
    assert set(task_changes) == {f.name for f in dataclasses.fields(task) if f.init}
    for k, v in task_changes.items():
        t = _task(**{k: v})
        keys.add(sft_key(t, model_dims(_model(t)), TINY))
    keys.add(sft_key(TASKS.get("rlvr"), dims, TINY))  # another task class
    assert len(keys) == 1 + len(changed) + 3 + len(task_changes) + 1


def test_init_config_validation():
    assert InitConfig.of(None).kind == "random"
    assert InitConfig.of({"kind": "sft", "tau": 1}).tau == 1.0
    with pytest.raises(TypeError, match="unknown init key"):
        InitConfig.of({"kind": "sft", "temperature": 0.3})
    with pytest.raises(ValueError, match="kind must be one of random, sft"):
        InitConfig.of({"kind": "warm"})
    with pytest.raises(ValueError, match="teacher must be one of"):
        InitConfig.of({"teacher": "oracle"})
    with pytest.raises(ValueError, match="tau"):
        InitConfig.of({"tau": 0})


def test_init_random_leaves_the_policy_and_training_unchanged():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from arenabench.trainers.local.trainer import train

    task = _task()
    torch.manual_seed(0)
    policy = _model(task)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    rng_state = torch.get_rng_state()
    assert init_policy(policy, task, {"kind": "random"}) is policy
    assert init_policy(policy, task, None) is policy
    assert all(torch.equal(v, before[k]) for k, v in policy.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng_state)

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("train", overrides=["tracking=none", "steps=3"]), resolve=True)
    assert cfg["init"] == {"kind": "random"}  # the default
    skip = ("wall_time", "steps_per_s", "judge_latency_p50", "judge_latency_p90")
    runs = []
    for init in ({"kind": "random"}, None, {**dataclasses.asdict(TINY), "kind": "random"}):
        c = {k: v for k, v in cfg.items() if k != "init"}
        if init is not None:
            c["init"] = init
        m = train(c, progress=False)
        runs.append({k: v for k, v in m.items() if k not in skip})
    assert runs[0] == runs[1] == runs[2]


def test_task_shared_weight_default_is_the_old_formula():
    task = _task()
    rng = np.random.default_rng([task.seed, 7])
    shared, own = rng.standard_normal(task.vocab), rng.standard_normal((task.n_prompts, task.vocab))
    np.testing.assert_array_equal(task.values, (shared[None, :] + own) / np.sqrt(2.0))
    hard = _task("hard")
    rng = np.random.default_rng([hard.seed, 7])
    rng.standard_normal(hard.vocab)
    np.testing.assert_array_equal(hard.values, rng.standard_normal((hard.n_prompts, hard.vocab)))
    assert (hard.vocab, hard.response_len, hard.shared_weight) == (64, 16, 0.0)


def test_imperfect_teacher():
    task = _task()
    icfg = InitConfig.of(_conf("init", "sft_imperfect"))
    logits = sft.teacher_logits(task, icfg)
    np.testing.assert_array_equal(logits, sft.teacher_logits(task, icfg))  # seeded
    assert not np.array_equal(logits, sft.teacher_logits(task, dataclasses.replace(icfg, seed=1)))
    mode_is_best = sft.teacher_logits(task, icfg).argmax(1) == task.values.argmax(1)
    assert 0.0 < mode_is_best.mean() < 1.0  # its mode is not always the optimum: RL has to find it
    exact = dataclasses.replace(icfg, rho=1.0, noise=0.0)
    np.testing.assert_array_equal(sft.teacher_logits(task, exact), task.values)
    p = sft.teacher_probs(task, icfg)
    np.testing.assert_allclose(p.sum(1), 1.0)


def test_sft_policy_beats_random_and_its_greedy_answers_are_the_teacher_mode(sft_cache):
    task = _task()
    icfg = InitConfig.of(_conf("init", "sft"))
    torch.manual_seed(0)
    rand = _model(task).eval()
    pol = init_policy(_model(task), task, icfg, root=sft_cache).eval()
    prompts = torch.as_tensor(task.prompts[np.repeat(np.arange(task.n_prompts), 8)])
    ids = np.repeat(np.arange(task.n_prompts), 8)
    T = torch.ones(len(ids))
    q_rand = task.quality(
        ids, sample(rand, prompts, task.response_len, T, torch.Generator().manual_seed(0)).numpy()
    )
    q_sft = task.quality(
        ids, sample(pol, prompts, task.response_len, T, torch.Generator().manual_seed(0)).numpy()
    )
    assert q_sft.mean() > q_rand.mean() + 1.0
    greedy = sample(
        pol, torch.as_tensor(task.prompts), task.response_len, torch.zeros(task.n_prompts), torch.Generator()
    ).numpy()
    mode = sft.teacher_probs(task, icfg).argmax(1)
    assert np.mean(greedy == mode[:, None]) >= 0.95


# The chosen τ's step-0 statistics in results/calibration.md (calibration seed 0, 16 batches);
# reproduced here from a fresh build with another probe seed and 8 batches, within ±20% relative.
CALIBRATED = {"sigma_group": 0.0310, "sigma_noise": 0.0180}
TOL = 0.20


def test_calibration_statistics_reproduce(sft_cache):
    task = _task()
    icfg = InitConfig.of(_conf("init", "sft"))
    pol = init_policy(_model(task), task, icfg, root=sft_cache).eval()
    jcfg = _conf("judge", "calibrated")
    judge = judges.get(jcfg["preset"], seed=jcfg["seed"])
    got = measure(pol, task, judge, float(_conf("trainer", "grpo")["temperature"]), batches=8, seed=1)
    for k, want in CALIBRATED.items():
        assert got[k] == pytest.approx(want, rel=TOL), k


def test_trainer_starts_from_the_sft_checkpoint(sft_cache, monkeypatch):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from arenabench.trainers.local.trainer import train

    monkeypatch.setenv("ARENABENCH_CACHE", str(sft_cache))
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = OmegaConf.to_container(
            compose("train", overrides=["tracking=none", "steps=1", "init=sft", "eval_every=0"]), resolve=True
        )
    task = _task()
    pol = init_policy(_model(task), task, cfg["init"], root=sft_cache).eval()
    greedy = sample(
        pol, torch.as_tensor(task.prompts), task.response_len, torch.zeros(task.n_prompts), torch.Generator()
    ).numpy()
    m = train(cfg, progress=False)
    assert len(list((sft_cache / "sft").glob("*.pt"))) == 1  # the module's checkpoint, loaded
    # the greedy-eval baseline is the SFT policy: after one small step the policy still ties it
    assert m["eval_quality"] == pytest.approx(
        task.quality(np.arange(task.n_prompts), greedy).mean(), abs=0.05
    )
    assert m["kl"] == 0.0  # old_logp == ref_logp at step 0: the reference is the initialized policy
    assert m["sigma_group"] == pytest.approx(CALIBRATED["sigma_group"], rel=0.5)  # one batch


def test_parallel_builds_of_one_checkpoint_do_not_corrupt_it(tmp_path):
    """Two processes that need the same checkpoint at once (a parallel sweep) both succeed, and the
    file left behind loads and equals a build of its own."""
    code = (
        "import dataclasses, sys; from arenabench.trainers.local.task import TASKS; "
        "from arenabench.trainers.local.sft import InitConfig, init_policy; "
        "from arenabench.trainers.local.policy import TinyLM; t = TASKS.get('preference'); "
        "init_policy(TinyLM(t.vocab, t.prompt_len + t.response_len, 32, 2, 4), t, "
        f"InitConfig(**{dataclasses.asdict(TINY)!r}))"
    )
    env = {**os.environ, "ARENABENCH_CACHE": str(tmp_path / "shared")}
    env["PYTHONPATH"] = str(CONF.parent) + ":" + env.get("PYTHONPATH", "")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    (ckpt,) = (tmp_path / "shared" / "sft").iterdir()  # one file, no temp file left
    task = _task()
    ref, _, _ = load_or_build(task, model_dims(_model(task)), TINY, tmp_path / "own")
    got = torch.load(ckpt, weights_only=True)["state_dict"]
    assert all(torch.equal(v, got[k]) for k, v in ref["state_dict"].items())


@pytest.mark.slow
def test_tau_calibration_command_runs(tmp_path, monkeypatch, capsys):
    """``python -m arenabench.trainers.local.calibrate`` end to end (it imported a helper the
    trainer no longer has): a 12-step SFT at one τ, one rollout batch."""
    from arenabench.trainers.local import calibrate

    monkeypatch.setenv("ARENABENCH_CACHE", str(tmp_path))
    assert calibrate.main(["--taus", "0.3", "--batches", "1", "--set", "steps=12"]) == 0
    out = capsys.readouterr().out
    assert "judge=calibrated" in out and "0.3" in out

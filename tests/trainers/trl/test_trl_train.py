"""The TRL adapter inside TRL's real ``GRPOTrainer`` (trl 1.16) on a tiny local model, on the CPU.

Marked ``trl`` (needs the ``trl`` extra) and ``slow``. No download: the model is built locally."""

import math

import numpy as np
import pytest

from arenabench import rewards
from arenabench.engine import Engine
from arenabench.trainers.scoring import judge_stack
from arenabench.trainers.trl import ArenaReward, GroupLayoutError, example

pytestmark = [pytest.mark.trl, pytest.mark.slow]

TRL_MISSING = (
    "TRL is not installed in this venv: these tests are part of the test command, so install the trl "
    "extra (`make .venv/.vllm` installs it with the vLLM CPU path) instead of skipping them"
)


@pytest.fixture(scope="module", autouse=True)
def _need_trl():
    try:
        import trl
    except ImportError:
        pytest.fail(TRL_MISSING)
    assert trl.__version__ == "1.16.0", trl.__version__


K, N = 2, 4  # prompts × generations per step


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    return example.build_model(tmp_path_factory.mktemp("trl") / "tiny_model")


def args_for(tmp_path, model_dir, *extra):
    return example.parser().parse_args(
        [
            "--model",
            str(model_dir),
            "--out-dir",
            str(tmp_path),
            "--prompts-per-step",
            str(K),
            "--num-generations",
            str(N),
            # plumbing, not learning: 8-token completions (distinct texts) and a rate that moves the
            # random tiny model, as before the example's defaults became the one-word task's
            "--max-completion-length",
            "8",
            "--lr",
            "1e-4",
            *extra,
        ]
    )


def arena_rows(trainer):
    return [row for row in trainer.state.log_history if "arena/judge_calls" in row]


def test_grpo_trains_with_seeded_single_elim_and_logs_judge_metrics(tmp_path, model_dir, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "trl-test")
    args = args_for(tmp_path, model_dir, "--steps", "3", "--report-to", "mlflow", "--seed", "3")
    trainer, reward = example.make_trainer(args)
    assert trainer._has_async_funcs  # TRL awaits it on its event-loop thread; the engine runs in ours
    trainer.train()
    reward.close()
    assert trainer.state.global_step == 3 and reward.calls == 3  # one generation batch per step

    # the reward function saw complete groups: K chunks of N completions of one prompt
    for call in reward.history:
        assert [len(g) for g in call.groups] == [N] * K
        assert len({g.prompt for g in call.groups}) == K or call.groups[0].prompt == call.groups[1].prompt
        # its values are the engine's, recomputed by a fresh engine on the same groups, seed and step
        stack, _ = judge_stack(example.judge_config(args))
        fresh = Engine(stack, seed=args.seed).run(
            rewards.build({"name": "seeded_single_elim"}), call.groups, step=call.step
        )
        want = np.concatenate([r.advantage for r in fresh.results])
        got = np.array([np.nan if v is None else v for v in call.values])
        assert np.allclose(got, want), (got, want)
        assert fresh.stats.judge_calls == call.stats.judge_calls and fresh.stats.waves == 3  # 1 + log2 4
    assert [c.step for c in reward.history] == [0, 1, 2]

    # scale_rewards="none": TRL's own advantages (last generation batch) are the engine's
    trl_adv = np.array(trainer._logs["advantages"])
    assert np.allclose(trl_adv, np.array(reward.history[-1].values, dtype=float), atol=1e-5)

    # judge metrics in TRL's logs, every step, with the values the reward computed
    rows = arena_rows(trainer)
    assert len(rows) == 3
    for row, call in zip(rows, reward.history, strict=True):
        for key in (
            "arena/judge_calls",
            "arena/failures",
            "arena/waves",
            "arena/routed_share",
            "arena/cache_hits",
            "arena/masked_groups",
            "arena/none_rewards",
        ):
            assert row[key] == pytest.approx(call.metrics[key]), key
        assert row["arena/judge_calls"] == 2 * 6 * K  # 2N − 2 matches × both orders × K groups
        assert math.isfinite(row["loss"])

    # and in the MLflow run TRL's report_to=["mlflow"] opened
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name("trl-test")
    (run,) = client.search_runs([exp.experiment_id])
    hist = client.get_metric_history(run.info.run_id, "arena/judge_calls")
    assert sorted(m.step for m in hist) == [1, 2, 3] and {m.value for m in hist} == {24.0}
    assert "arena/masked_groups" in run.data.metrics and "arena/waves" in run.data.metrics


@pytest.mark.parametrize(
    "output, scale",
    [
        ("advantage", "none"),
        ("advantage", "group"),
        ("advantage", "batch"),
        ("reward", "group"),
        ("reward", "none"),
    ],
)
def test_how_rewards_compose_with_trl_scale_rewards(tmp_path, model_dir, output, scale):
    """TRL's advantage code (``_generate_and_score_completions``) on the adapter's values."""
    args = args_for(
        tmp_path, model_dir, "--output", output, "--scale-rewards", scale, "--reward", "round_robin"
    )
    with pytest.warns(UserWarning) if scale != example.RECOMMENDED_SCALE_REWARDS[output] else _nothing():
        trainer, reward = example.make_trainer(args)
    rows = [trainer.train_dataset[0]] * N + [trainer.train_dataset[1]] * N  # RepeatSampler's layout
    trainer.model.train()
    trainer._generate_and_score_completions(rows)
    got = np.array(trainer._logs["advantages"])
    res = reward.history[-1].results
    r = np.stack([x.advantage if output == "advantage" else x.reward for x in res])  # (K, N)
    centred = r - r.mean(axis=1, keepdims=True)
    if scale == "none":
        want = centred
    elif scale == "group":
        want = centred / (r.std(axis=1, ddof=1, keepdims=True) + 1e-4)
    else:
        want = centred / (r.std(ddof=1) + 1e-4)
    assert np.allclose(got, want.ravel(), atol=1e-4)
    engine_adv = np.concatenate([x.advantage for x in res])
    if output == "advantage" and scale == "none":  # the pass-through: exactly the engine's
        assert np.allclose(got, engine_adv, atol=1e-6)
    if output == "advantage" and scale == "group":  # re-standardized with ddof 1: × √((N−1)/N)
        assert np.allclose(got, engine_adv * math.sqrt((N - 1) / N), atol=1e-3)
    if output == "advantage" and scale == "batch" and all(np.ptp(x.advantage) > 0 for x in res):
        assert np.allclose(got, engine_adv * math.sqrt((K * N - 1) / (K * N)), atol=1e-3)
    if output == "reward" and scale == "group":  # TRL's recipe on rank rewards: the same factor
        assert np.allclose(got, engine_adv * math.sqrt((N - 1) / N), atol=1e-3)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_batch_mixing_prompts_raises_one_clear_error(tmp_path, model_dir):
    args = args_for(tmp_path, model_dir, "--steps", "1")
    wrong = ArenaReward("seeded_single_elim", num_generations=2 * N)  # chunks of 8 = two prompts
    trainer, _ = example.make_trainer(args, reward=wrong, check=False)
    with pytest.raises(GroupLayoutError, match=r"chunk 0 \(completions 0\.\.7\) mixes 2 prompts"):
        trainer.train()
    assert wrong.calls == 0


def test_a_judge_failing_every_call_gives_none_and_training_goes_on(tmp_path, model_dir):
    args = args_for(tmp_path, model_dir, "--steps", "2", "--faults", "1.0")
    trainer, reward = example.make_trainer(args)
    trainer.train()
    reward.close()
    assert trainer.state.global_step == 2
    for call in reward.history:
        assert call.values == [None] * (K * N) and all(call.masked)
    rows = arena_rows(trainer)
    assert len(rows) == 2
    for row in rows:
        assert row["arena/none_rewards"] == K * N and row["arena/masked_groups"] == K
        assert row["arena/failures"] > 0 and row["arena/judge_faults"] > 0
        assert row["loss"] == 0.0 or abs(row["loss"]) < 1e-6  # no advantage, no policy gradient
    assert np.allclose(np.array(trainer._logs["advantages"]), 0.0)  # TRL: None → NaN → advantage 0


@pytest.mark.parametrize("loss_type", example.LOSS_TYPES)
def test_every_trl_loss_type_trains_on_arena_rewards(tmp_path, model_dir, loss_type):
    args = args_for(tmp_path, model_dir, "--steps", "1", "--loss-type", loss_type)
    overrides = {"importance_sampling_level": "sequence"} if loss_type == "luspo" else {}  # LUSPO needs it
    trainer, reward = example.make_trainer(args, **overrides)
    assert trainer.loss_type == loss_type
    if loss_type == "cispo":  # TRL caps CISPO's IS weight at epsilon_high itself: the example sets 1.2
        assert trainer.epsilon_high == example.CISPO_EPSILON_HIGH == 1.2
    trainer.train()
    reward.close()
    (row,) = arena_rows(trainer)
    assert trainer.state.global_step == 1 and row["arena/judge_calls"] == 2 * 6 * K
    assert math.isfinite(row["loss"]) and row["grad_norm"] > 0  # the arena advantages moved the policy


@pytest.mark.vllm
def test_example_with_a_vllm_serve_judge(tmp_path, model_dir, vllm_server):
    """The openai judge flags: a real ``vllm serve`` (the tiny judge model) answers every wave."""
    url, served = vllm_server
    args = args_for(
        tmp_path, model_dir, "--steps", "1", "--judge", "openai", "--judge-url", url, "--judge-model", served,
        "--api-key-env", "", "--judge-max-tokens", "64", "--rubric", "open_writing",
    )  # fmt: skip
    trainer, reward = example.make_trainer(args)
    trainer.train()
    reward.close()
    (row,) = arena_rows(trainer)
    # a temperature-0 judge repeats its verdicts: seeded_single_elim's default (anchor_seed=auto)
    # plays record there, 2N − 3 matches (the anchor sits the bracket out) × both orders × K groups
    assert row["arena/judge_calls"] == 2 * (2 * N - 3) * K and row["arena/failures"] == 0
    assert row["arena/judge_prompt_tokens"] > 0 and row["arena/judge_completion_tokens"] > 0
    assert reward.history[-1].values.count(None) == 0 and trainer.state.global_step == 1

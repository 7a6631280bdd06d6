"""``scripts/gpu_smoke.sh`` argument parsing, on the CPU (``--dry-run`` runs nothing and needs no
GPU or package): ``--rollout hf|vllm`` (default vllm) picks the launch overrides and the packages
it checks for; bad arguments exit 2 naming the valid choices. The GPU runs themselves are
issue 30's device check, not CI."""

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_smoke.sh"


def smoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args,rollout",
    [((), "vllm"), (("--rollout", "vllm"), "vllm"), (("--rollout", "hf"), "hf"), (("--rollout=hf",), "hf")],
)
def test_dry_run_prints_the_two_launches_of_the_chosen_rollout(tmp_path, args, rollout):
    out = smoke(*args, "--dry-run", str(tmp_path / "work"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"gpu_smoke: rollout={rollout} work={tmp_path / 'work'} python=python"
    runs = [x.removeprefix("gpu_smoke: would run: ") for x in lines if x.startswith("gpu_smoke: would run: ")]
    assert [r.split()[5] for r in runs] == ["loss=grpo", "loss=cispo"]
    assert all(r.startswith("python -m arenabench.trainers.verl.launch --config-name smoke") for r in runs)
    modules = lines[1].split("modules: ")[1].split()
    if rollout == "hf":  # verl + ray + a CUDA torch: no vLLM
        assert all(r.endswith("actor_rollout_ref.rollout.name=hf") for r in runs)
        assert "vllm" not in modules and {"verl", "ray"} <= set(modules)
    else:
        assert not any("rollout.name" in r for r in runs) and "vllm" in modules
    assert lines[-1] == "gpu_smoke: dry run, nothing was run"
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (("--rollout", "sglang"), "unknown rollout 'sglang' (valid: hf, vllm)"),
        (("--rollout",), "--rollout needs a value: hf or vllm"),
        (("--rollouts", "hf"), "unknown option --rollouts (valid: --rollout hf|vllm, --dry-run, --help)"),
        (("a", "b"), "one WORK_DIR only (got a and b)"),
    ],
)
def test_bad_arguments_exit_2_naming_the_valid_choices(args, message):
    out = smoke(*args, "--dry-run")
    assert out.returncode == 2 and out.stderr.strip() == f"gpu_smoke: {message}"
    assert out.stdout == ""


def test_help_exits_0():
    out = smoke("--help")
    assert out.returncode == 0 and "--rollout hf" in out.stdout and "--dry-run" in out.stdout

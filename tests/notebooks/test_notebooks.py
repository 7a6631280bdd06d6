"""The notebooks execute end to end (papermill, real kernel) on a tiny sweep in a temp MLflow store,
and are committed without outputs."""

import json

import pytest
from helpers import ROOT
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# figures each notebook must draw (image/png outputs): 1.0 σ_group vs σ_noise, SNR, entropy,
# advantage–oracle r; 2.0 the paired-difference plot and the quality-vs-judge-calls frontier
MIN_FIGURES = {"1.0-discriminative-collapse": 4, "2.0-topology-comparison": 2}


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    """Two constructors × two seeds, 8 steps each, logged like sweep jobs (same tags), from the
    experiments' own warm start (init=sft; the SFT checkpoint is built once and cached)."""
    from arenabench.tracking import Tracker
    from arenabench.trainers.local.trainer import train

    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"
    for experiment in ("snr_dynamics", "table2"):
        for reward in ("pointwise", "seeded_single_elim"):
            for seed in (0, 1):
                with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
                    cfg = compose(
                        "train",
                        overrides=[
                            f"experiment={experiment}",
                            f"reward={reward}",
                            f"seed={seed}",
                            "steps=8",
                            "eval_every=4",
                        ],
                    )
                tags = {
                    "constructor": reward,
                    "reward": reward,
                    "setting": f"reward={reward}",
                    "seed": str(seed),
                    "sweep": "s1",
                }
                with Tracker(experiment, run_name=f"{reward}-{seed}", tags=tags, uri=uri) as tr:
                    train(OmegaConf.to_container(cfg, resolve=True), tracker=tr, progress=False)
    return uri


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_a_tiny_sweep(path, tiny_store, tmp_path):
    import papermill

    experiment = "snr_dynamics" if "collapse" in path.stem else "table2"
    out = tmp_path / path.name
    papermill.execute_notebook(
        str(path),
        str(out),
        parameters={"experiment": experiment, "tracking_uri": tiny_store},
        kernel_name="python3",
        progress_bar=False,
        cwd=str(ROOT / "notebooks"),  # where Jupyter starts a notebook's kernel
    )
    nb = json.loads(out.read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert sum(bool(c.get("outputs")) for c in nb["cells"] if c["cell_type"] == "code") >= 3
    pngs = sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))
    assert pngs >= MIN_FIGURES[path.stem], f"{path.stem}: {pngs} figures"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    assert any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"])
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            assert c.get("outputs") == [] and c.get("execution_count") is None, path.name


def test_notebooks_find_the_demo_store_from_the_repo_root_or_notebooks(monkeypatch, tmp_path):
    """find_store's one rule, from a checkout's root or its notebooks/ (Jupyter's default cwd):
    an explicit URI or $MLFLOW_TRACKING_URI, else results/mlflow.db if it exists, else make demo's
    results/demo/mlflow.db if it exists, else results/mlflow.db."""
    from arenabench.compare import find_store

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    root = tmp_path / "checkout"
    (root / "conf").mkdir(parents=True)
    (root / "notebooks").mkdir()
    (root / "conf" / "train.yaml").write_text("")
    (root / "pyproject.toml").write_text("")
    main, demo = root / "results" / "mlflow.db", root / "results" / "demo" / "mlflow.db"
    for where in (root, root / "notebooks"):
        monkeypatch.chdir(where)
        assert find_store() == f"sqlite:///{main}"  # neither exists: the default
    demo.parent.mkdir(parents=True)
    demo.write_bytes(b"")
    for where in (root, root / "notebooks"):
        monkeypatch.chdir(where)
        assert find_store() == f"sqlite:///{demo}"  # after make demo alone
    main.write_bytes(b"")
    for where in (root, root / "notebooks"):
        monkeypatch.chdir(where)
        assert find_store() == f"sqlite:///{main}"  # a store of one's own runs wins
    monkeypatch.chdir(tmp_path)  # outside any checkout: the store beside the installed package
    assert find_store().endswith("/results/mlflow.db")
    other = f"sqlite:///{tmp_path}/x.db"
    assert find_store(other) == other
    monkeypatch.setenv("MLFLOW_TRACKING_URI", other)
    assert find_store() == other


@pytest.mark.slow  # ~7 s: a new sqlite MLflow store's migrations
def test_compare_reads_the_demo_store_after_make_demo(monkeypatch, tmp_path, capsys):
    """`arenabench compare` with no --uri, run in a checkout that holds only make demo's store,
    reads that store (issue 40.1)."""
    from arenabench import cli

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    root = tmp_path / "checkout"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "train.yaml").write_text("")
    (root / "pyproject.toml").write_text("")
    demo = root / "results" / "demo" / "mlflow.db"
    demo.parent.mkdir(parents=True)
    import mlflow

    mlflow.MlflowClient(f"sqlite:///{demo}").create_experiment("demo_x")  # no process-global URI left set
    monkeypatch.chdir(root)
    assert cli.main(["compare", "--experiment", "nope"]) == 2
    assert "experiments in the store: Default, demo_x" in capsys.readouterr().err

"""MLflow tracking and ``arenabench compare`` against a real sqlite store (no mocks)."""

from __future__ import annotations

import io
import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from arenabench.tracking import (
    DEFAULT_URI,
    Killed,
    Tracker,
    flatten,
    git_commit,
    lock_for,
    open_client,
    tracking_uri,
)

# MLflow's own SQLAlchemy mappers trigger this on import; not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One sqlite store for the tests that do not need a fresh one (creating its tables costs
    seconds); each test uses its own experiment names."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


def history(client, run_id, key):
    return [(m.step, m.value) for m in client.get_metric_history(run_id, key)]


# --------------------------------------------------------------------------- Tracker


def test_tracker_logs_params_tags_metrics_and_artifacts(store):
    cfg = {"reward": {"name": "anchor", "votes": 2}, "trainer": {"lr": 1e-5, "betas": [0.9, 0.99]}, "x": None}
    with Tracker(
        "basic", run_name="r0", params=flatten(cfg), tags={"seed": 3}, uri=store, flush_every=7
    ) as t:
        for step in range(20):
            t.log_metrics({"loss": 1.0 / (step + 1), "snr": float(step), "bad": math.nan}, step=step)
        t.log_metrics({"inf": math.inf}, step=20)
        t.log_text("a: 1\n", "config.yaml")
        t.log_dict({"eval_win_rate": 0.5}, "final_metrics.json")
        t.log_dict({"k": [1, 2]}, "extra.yaml")
        t.set_tags({"note": "hello"})
    assert t.skipped == 21
    client = MlflowClient(tracking_uri=store)
    run = client.get_run(t.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "r0"
    assert run.data.params == {
        "reward.name": "anchor",
        "reward.votes": "2",
        "trainer.lr": "1e-05",
        "trainer.betas": "[0.9, 0.99]",
        "x": "None",
    }
    assert run.data.tags["seed"] == "3" and run.data.tags["note"] == "hello"
    assert history(client, t.run_id, "loss") == [(s, 1.0 / (s + 1)) for s in range(20)]
    assert history(client, t.run_id, "snr") == [(s, float(s)) for s in range(20)]
    assert "bad" not in run.data.metrics and "inf" not in run.data.metrics
    # ... but counted: <metric>_nan_steps, cumulative, at every step the metric was not finite
    assert t.nan_steps == {"bad": 20, "inf": 1}
    assert history(client, t.run_id, "bad_nan_steps") == [(s, float(s + 1)) for s in range(20)]
    assert run.data.metrics["bad_nan_steps"] == 20.0 and run.data.metrics["inf_nan_steps"] == 1.0
    assert {a.path for a in client.list_artifacts(t.run_id)} == {
        "config.yaml",
        "final_metrics.json",
        "extra.yaml",
    }
    # artifacts live next to the database, not in ./mlruns of the working directory
    art = Path(client.get_experiment_by_name("basic").artifact_location.removeprefix("file://"))
    assert art.parent == Path(store.removeprefix("sqlite:///")).parent / "mlruns"
    assert (
        art / t.run_id / "artifacts" / "final_metrics.json"
    ).read_text().strip() == '{\n  "eval_win_rate": 0.5\n}'
    t.finish()  # idempotent
    assert client.get_run(t.run_id).info.status == "FINISHED"
    with pytest.raises(RuntimeError, match="already ended"):
        t.log_metrics({"loss": 0.0}, step=99)


def test_log_batch_respects_the_1000_metric_limit(store):
    with Tracker("wide", uri=store, flush_every=1000) as t:
        t.log_metrics({f"m{i}": float(i) for i in range(2500)}, step=0)
    run = MlflowClient(tracking_uri=store).get_run(t.run_id)
    assert len(run.data.metrics) == 2500 and run.data.metrics["m2499"] == 2499.0


def test_exception_fails_the_run_and_keeps_earlier_metrics(store):
    with pytest.raises(ZeroDivisionError), Tracker("boom", uri=store, flush_every=100) as t:
        for step in range(5):
            t.log_metrics({"q": float(step)}, step=step)
        raise ZeroDivisionError("boom")
    client = MlflowClient(tracking_uri=store)
    assert client.get_run(t.run_id).info.status == "FAILED"
    assert history(client, t.run_id, "q") == [(s, float(s)) for s in range(5)]

    with pytest.raises(SystemExit), Tracker("boom", uri=store) as t2:
        raise SystemExit(1)  # an exit that no signal caused is a failure
    assert client.get_run(t2.run_id).info.status == "FAILED"


def test_ctrl_c_closes_the_run_as_killed(store):
    # Python's own SIGINT handler, as in a terminal: a shell starts background jobs with SIGINT
    # ignored, and a test run launched that way would otherwise never see the signal
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), Tracker("int", uri=store) as t:
            t.log_metrics({"q": 1.0}, step=0)
            os.kill(os.getpid(), signal.SIGINT)  # Python's own handler: KeyboardInterrupt
            time.sleep(5)
    finally:
        signal.signal(signal.SIGINT, before)
    client = MlflowClient(tracking_uri=store)
    assert client.get_run(t.run_id).info.status == "KILLED"
    assert history(client, t.run_id, "q") == [(0, 1.0)]


def test_sigterm_closes_the_run_as_killed_and_restores_the_handler(store):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Killed) as e, Tracker("term", uri=store) as t:
        t.log_metrics({"q": 1.0}, step=0)
        assert signal.getsignal(signal.SIGTERM) != before
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises long before this ends
    assert isinstance(e.value, SystemExit) and e.value.code == 128 + signal.SIGTERM  # exits as killed
    assert signal.getsignal(signal.SIGTERM) == before
    client = MlflowClient(tracking_uri=store)
    assert client.get_run(t.run_id).info.status == "KILLED"
    assert history(client, t.run_id, "q") == [(0, 1.0)]


def test_mark_writes_a_status_early_and_finish_writes_the_last_one(store):
    """The verl launcher marks a SIGTERMed run KILLED before waiting for its workers (a SIGKILL
    may follow), and ends it after they are gone (verl's logger may have set FINISHED since)."""
    client = MlflowClient(tracking_uri=store)
    t = Tracker("mark", uri=store)
    t.mark("killed")
    assert client.get_run(t.run_id).info.status == "KILLED" and t.status is None  # still open here
    t.log_metrics({"q": 1.0}, step=0)
    client.set_terminated(t.run_id, "FINISHED")  # what verl's logger does on its way out
    t.finish("KILLED")
    assert client.get_run(t.run_id).info.status == "KILLED"
    assert history(client, t.run_id, "q") == [(0, 1.0)]
    t.mark("FAILED")  # a no-op once finished
    assert client.get_run(t.run_id).info.status == "KILLED"
    other = Tracker("mark", uri=store)
    with pytest.raises(ValueError, match="FINISHED, FAILED, KILLED"):
        other.mark("DONE")
    other.finish()


def _parallel_worker(uri: str, i: int) -> str:
    """Runs in a spawned process: one run of 200 steps, flushed often to contend on the db."""
    with Tracker("race", run_name=f"w{i}", params={"worker": i}, uri=uri, flush_every=10) as t:
        for step in range(200):
            t.log_metrics({"quality_mean": step + i / 10, "snr": float(i)}, step=step)
    return t.run_id


@pytest.mark.slow
def test_parallel_processes_share_a_new_store(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"  # NEW store: the processes race on creating its tables
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        run_ids = pool.starmap(_parallel_worker, [(uri, i) for i in range(4)])
    client = MlflowClient(tracking_uri=uri)
    exps = [e for e in client.search_experiments() if e.name == "race"]
    assert len(exps) == 1
    runs = client.search_runs([exps[0].experiment_id])
    assert sorted(r.info.run_id for r in runs) == sorted(run_ids)
    assert all(r.info.status == "FINISHED" for r in runs)
    for r in runs:
        i = int(r.data.params["worker"])
        assert history(client, r.info.run_id, "quality_mean") == [(s, s + i / 10) for s in range(200)]


# --------------------------------------------------------------------------- helpers


def test_tracking_uri_precedence_and_relative_sqlite_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri() == f"sqlite:///{tmp_path}/results/mlflow.db" == tracking_uri(DEFAULT_URI)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///env/db.sqlite")
    assert tracking_uri() == f"sqlite:///{tmp_path}/env/db.sqlite"
    assert not (tmp_path / "results").exists() and not (tmp_path / "env").exists()  # creates nothing
    assert tracking_uri("sqlite:////abs/x.db") == "sqlite:////abs/x.db"  # explicit wins
    assert tracking_uri("http://localhost:5000") == "http://localhost:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert tracking_uri() == "http://mlflow:5000"


def test_a_missing_store_folder_is_an_error_unless_asked_to_create_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/typo/mlflow.db"
    with pytest.raises(ValueError, match=r"folder .*typo does not exist \(a typo\?\)"):
        open_client(uri)
    with pytest.raises(ValueError, match="does not exist"):
        Tracker("x", uri=uri)
    assert not (tmp_path / "typo").exists()  # the failed command created nothing
    with Tracker("x", uri=uri, create=True) as t:
        t.log_metrics({"m": 1.0}, step=0)
    assert (tmp_path / "typo" / "mlflow.db").exists()


def test_a_corrupt_store_is_one_error_naming_it(tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_text("not a database\n" * 100)
    with pytest.raises(ValueError) as e:
        open_client(f"sqlite:///{db}")
    assert str(e.value).startswith(f"cannot open MLflow store {db}: ") and "\n" not in str(e.value)


def test_local_runs_carry_mlflows_source_and_git_tags(tmp_path):
    uri = f"sqlite:///{tmp_path}/m.db"
    with Tracker("tags", uri=uri) as t:
        pass
    tags = open_client(uri).get_run(t.run_id).data.tags
    assert tags["mlflow.source.type"] == "LOCAL" and tags["mlflow.source.name"]
    assert "mlflow.user" in tags
    # the commit of the code that ran (the checkout arenabench is imported from), whatever
    # started the process (pytest here; MLflow itself looks only beside sys.argv[0])
    commit = git_commit(Path(__file__).parent)
    assert commit is not None  # the tests run in a git checkout (CI: a clone)
    assert tags["mlflow.source.git.commit"] == commit


def test_log_figure_draws_before_taking_the_stores_lock(store):
    """A figure is drawn outside the lock (other processes' writes do not wait for matplotlib)
    and stored where ``MlflowClient.log_figure`` puts it: a PNG at the artifact path given."""
    import fcntl

    from matplotlib.figure import Figure

    held = []

    class Probe(Figure):
        def savefig(self, fname, **kw):
            # a second open file description of the lock file gets the flock iff nobody holds it
            with open(store.removeprefix("sqlite:///") + ".lock", "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    held.append(True)
                else:
                    fcntl.flock(f, fcntl.LOCK_UN)
                    held.append(False)
            return super().savefig(fname, **kw)

    fig = Probe(figsize=(2, 1))
    fig.add_subplot().plot([0, 1], [1, 0])
    with Tracker("figure", uri=store) as t:
        t.log_figure(fig, "plots/curves.png")
    assert held == [False]
    client = MlflowClient(tracking_uri=store)
    assert [a.path for a in client.list_artifacts(t.run_id, "plots")] == ["plots/curves.png"]
    art = Path(client.get_experiment_by_name("figure").artifact_location.removeprefix("file://"))
    assert (art / t.run_id / "artifacts" / "plots" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lock_for_is_reentrant_and_noop_off_sqlite(tmp_path):
    uri = f"sqlite:///{tmp_path}/l.db"
    with lock_for(uri), lock_for(uri):  # nested in one thread: no deadlock
        assert (tmp_path / "l.db.lock").exists()
    with lock_for("http://localhost:5000"):
        pass
    assert not list(tmp_path.glob("*.db"))  # locking never creates the database


def test_flatten_truncates_long_values():
    out = flatten({"a": {"b": {"c": 1}, "e": {}}, "long": "x" * 7000, "t": (1, 2)})
    assert out["a.b.c"] == "1" and out["a.e"] == "{}" and out["t"] == "[1, 2]"
    assert len(out["long"]) == 6000 and out["long"].endswith("...")


def test_importing_tracking_and_the_cli_does_not_import_mlflow():
    code = "import sys, arenabench.tracking, arenabench.cli; print('mlflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_git_commit(tmp_path):
    sha = git_commit(Path(__file__).parent)
    assert sha is None or (len(sha) == 40 and int(sha, 16) >= 0)
    assert git_commit(tmp_path) is None


# --------------------------------------------------------------------------- compare

SETTINGS = {"reward=anchor": [0.6, 0.7, 0.8], "reward=swiss": [0.2, 0.5, 0.5]}
STEPS = 4


def _log_sweep(uri, sweep, settings, status="FINISHED"):
    for setting, finals in settings.items():
        for seed, final in enumerate(finals):
            tags = {"constructor": setting.split("=")[1], "setting": setting, "seed": seed, "sweep": sweep}
            t = Tracker("cmp", run_name=f"{setting} seed={seed}", tags=tags, uri=uri)
            for step in range(STEPS):
                t.log_metrics({"eval_win_rate": final * (step + 1) / STEPS, "snr": 1.0 + seed}, step=step)
            t.finish(status)


@pytest.fixture(scope="module")
def cmp_store(store) -> str:
    _log_sweep(store, "multirun/old", {"reward=anchor": [0.0, 0.0], "reward=old": [1.0]})
    time.sleep(0.01)  # the new sweep starts strictly later
    _log_sweep(store, "multirun/new", SETTINGS)
    _log_sweep(store, "multirun/new", {"reward=anchor": [0.99]}, status="FAILED")
    return store


def test_summarize_latest_sweep(cmp_store):
    from arenabench.compare import load_runs, summarize

    df = load_runs("cmp", uri=cmp_store)
    assert len(df) == 6 and set(df["sweep"]) == {"multirun/new"} and set(df["status"]) == {"FINISHED"}
    assert {"run_id", "status", "start_time", "constructor", "setting", "seed", "snr"} <= set(df.columns)
    s = summarize(df).set_index("setting")
    assert list(s.index) == ["reward=anchor", "reward=swiss"]  # by mean, descending
    assert s.loc["reward=anchor", "n"] == 3
    assert s.loc["reward=anchor", "mean"] == pytest.approx(0.7, abs=1e-12)
    assert s.loc["reward=anchor", "std"] == pytest.approx(0.1, abs=1e-12)
    assert s.loc["reward=swiss", "mean"] == pytest.approx(0.4, abs=1e-12)
    assert s.loc["reward=swiss", "std"] == pytest.approx(math.sqrt(0.03), abs=1e-12)
    assert s.loc["reward=anchor", "mean ± std"] == "0.700 ± 0.100"

    assert len(load_runs("cmp", uri=cmp_store, sweep="all")) == 9
    assert len(load_runs("cmp", uri=cmp_store, include_failed=True)) == 7
    old = summarize(load_runs("cmp", uri=cmp_store, sweep="multirun/old")).set_index("setting")
    assert math.isnan(old.loc["reward=old", "std"]) and old.loc["reward=old", "mean ± std"] == "1.000"
    by_c = summarize(df, metric="snr", by="constructor").set_index("constructor")
    assert by_c.loc["anchor", "mean"] == pytest.approx(2.0)


def test_compare_errors_name_the_choices(cmp_store):
    from arenabench.compare import load_runs, metric_curves, summarize

    with pytest.raises(ValueError, match=r"unknown experiment 'nope'; experiments in the store: .*cmp"):
        load_runs("nope", uri=cmp_store)
    df = load_runs("cmp", uri=cmp_store)
    with pytest.raises(ValueError, match="unknown metric 'win_rate'; available: eval_win_rate, snr"):
        summarize(df, metric="win_rate")
    with pytest.raises(ValueError, match="unknown metric 'win_rate'; available: eval_win_rate, snr"):
        metric_curves("cmp", "win_rate", uri=cmp_store)
    with pytest.raises(ValueError, match="unknown sweep 'x'; sweeps: multirun/new, multirun/old"):
        load_runs("cmp", uri=cmp_store, sweep="x")


def test_metric_curves_average_seeds_stepwise(cmp_store, tmp_path):
    from arenabench.compare import metric_curves

    png = tmp_path / "plots" / "curves.png"
    curves = metric_curves("cmp", "eval_win_rate", uri=cmp_store, path=png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(curves.columns[:4]) == ["step", "group", "mean", "std"]
    assert len(curves) == 2 * STEPS
    for setting, finals in SETTINGS.items():
        c = curves[curves["group"] == setting].sort_values("step")
        assert list(c["step"]) == list(range(STEPS))
        want = [sum(finals) / len(finals) * (s + 1) / STEPS for s in range(STEPS)]
        assert c["mean"].to_numpy() == pytest.approx(want, abs=1e-12)
        assert (c["n"] == 3).all()


def test_cli_compare_csv_roundtrip_and_bad_experiment(cmp_store, tmp_path, capsys):
    from arenabench import cli  # here, not at the top: spawned workers import this module

    png = tmp_path / "cli.png"
    argv = ["compare", "--experiment", "cmp", "--uri", cmp_store, "--format", "csv", "--plot", str(png)]
    argv += ["--metric", "eval_win_rate"]
    assert cli.main(argv) == 0
    got = pd.read_csv(io.StringIO(capsys.readouterr().out)).set_index("setting")
    assert got.loc["reward=anchor", "mean"] == pytest.approx(0.7, abs=1e-12)
    assert got.loc["reward=anchor", "std"] == pytest.approx(0.1, abs=1e-12)
    assert got.loc["reward=swiss", "mean"] == pytest.approx(0.4, abs=1e-12)
    assert list(got["n"]) == [3, 3] and png.stat().st_size > 0

    out = tmp_path / "t.md"
    win = ["--metric", "eval_win_rate"]
    md = ["--format", "markdown", "-o", str(out), *win]
    assert cli.main(["compare", "-e", "cmp", "--uri", cmp_store, *md]) == 0
    assert out.read_text().splitlines()[0] == "| setting | n | mean | std | mean ± std |"
    assert cli.main(["compare", "-e", "cmp", "--uri", cmp_store, *win]) == 0
    assert "0.700 ± 0.100" in capsys.readouterr().out
    # the default metric is the primary one; this store has none: one error naming what it has
    assert cli.main(["compare", "-e", "cmp", "--uri", cmp_store]) == 2
    assert "unknown metric 'eval_sampled_quality'; available: eval_win_rate, snr" in capsys.readouterr().err

    assert cli.main(["compare", "--experiment", "nope", "--uri", cmp_store]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("arenabench: error: unknown experiment 'nope'")
    missing = f"sqlite:///{tmp_path}/none.db"
    assert cli.main(["compare", "--experiment", "cmp", "--uri", missing]) == 2
    assert "no MLflow database" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
    in_missing_folder = f"sqlite:///{tmp_path}/no/such/folder/m.db"
    assert cli.main(["compare", "--experiment", "cmp", "--uri", in_missing_folder]) == 2
    assert not (tmp_path / "no").exists()  # a failed command creates nothing


def test_compare_warns_about_unfinished_runs_it_leaves_out(cmp_store, capsys):
    from arenabench import cli
    from arenabench.compare import UnfinishedRunsWarning, load_runs

    want = r"1 run\(s\) of sweep multirun/new did not finish \(1 FAILED\)"
    with pytest.warns(UnfinishedRunsWarning, match=want):
        df = load_runs("cmp", uri=cmp_store)
    assert df.attrs["unfinished"] == {"FAILED": 1}
    assert cli.main(["compare", "-e", "cmp", "--uri", cmp_store, "--metric", "eval_win_rate"]) == 0
    warned = [e for e in capsys.readouterr().err.splitlines() if e.startswith("arenabench: warning:")]
    assert len(warned) == 1 and "1 run(s) of sweep multirun/new did not finish (1 FAILED)" in warned[0]


def test_compare_groups_by_arm_and_warns_when_a_grouping_pools_arms(tmp_path, capsys):
    """pointwise and pointwise_budget share the constructor 'pointwise' but are different arms."""
    from arenabench import cli
    from arenabench.compare import PooledArmsWarning, load_runs, summarize

    uri = f"sqlite:///{tmp_path}/pool.db"
    for reward, value in (("pointwise", 0.1), ("pointwise_budget", 0.3)):
        for seed in range(2):
            tags = {"constructor": "pointwise", "reward": reward, "setting": f"reward={reward}",
                    "seed": seed, "sweep": "s"}  # fmt: skip
            with Tracker("pool", tags=tags, uri=uri) as t:
                t.log_metrics({"eval_sampled_quality": value + seed / 100}, step=0)
    df = load_runs("pool", uri=uri)
    by_arm = summarize(df, metric="eval_sampled_quality").set_index("setting")
    assert list(by_arm["n"]) == [2, 2]
    assert by_arm.loc["reward=pointwise_budget", "mean"] == pytest.approx(0.305)
    want = "pools different arms .*reward=pointwise \\| reward=pointwise_budget"
    with pytest.warns(PooledArmsWarning, match=want):
        pooled = summarize(df, metric="eval_sampled_quality", by="constructor")
    assert list(pooled["n"]) == [4]
    assert cli.main(["compare", "-e", "pool", "--uri", uri]) == 0  # the primary metric, by arm
    out, err = capsys.readouterr()
    assert "reward=pointwise_budget" in out and "warning" not in err  # by arm: nothing pooled
    assert cli.main(["compare", "-e", "pool", "--uri", uri, "--by", "constructor"]) == 0
    warned = [e for e in capsys.readouterr().err.splitlines() if e.startswith("arenabench: warning:")]
    assert len(warned) == 1 and warned[0].startswith("arenabench: warning: grouping by 'constructor' pools")

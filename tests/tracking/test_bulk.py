"""The bulk metric writer stores exactly what ``MlflowClient.log_batch`` stores (real sqlite)."""

from __future__ import annotations

import sqlite3

import pytest
from mlflow.entities import Metric

from arenabench.tracking import RunLogger, get_or_create_experiment, open_client
from arenabench.tracking.bulk import write_metrics

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")


def rows(db, run_id):
    """Every stored point and latest value of a run, as the tables hold them."""
    con = sqlite3.connect(db)
    q = "SELECT key, value, timestamp, step, is_nan FROM {} WHERE run_uuid = ? ORDER BY 1, 4, 3, 2"
    out = [con.execute(q.format(t), (run_id,)).fetchall() for t in ("metrics", "latest_metrics")]
    con.close()
    return out


def batches():
    """Two flushes: the second holds older and newer points of keys the first wrote (the latest
    value must follow (step, timestamp, value)), ties in step and time, a repeated point, a huge
    value and a new key."""
    first = [Metric(k, v * (s + 1), 1000 + s, s) for s in range(30) for k, v in (("a", 0.1), ("b", -2.5))]
    first.append(Metric("a", 0.1, 1000, 0))  # identical to a point above: written once
    second = [Metric("a", 7.0, 999, 3), Metric("a", 1e300, 2000, 40), Metric("b", -1.0, 1029, 29),
              Metric("b", -80.0, 1029, 29), Metric("c", 3.25, 5, 0)]  # fmt: skip
    return first, second


def test_bulk_rows_equal_log_batch_rows(tmp_path):
    db = tmp_path / "m.db"
    client = open_client(f"sqlite:///{db}")
    exp = get_or_create_experiment(client, "bulk", f"sqlite:///{db}")
    slow, fast = (client.create_run(exp).info.run_id for _ in range(2))
    for batch in batches():
        client.log_batch(slow, metrics=batch)
        assert write_metrics(client, fast, batch)
    assert rows(db, fast) == rows(db, slow)
    assert client.get_run(fast).data.metrics == client.get_run(slow).data.metrics == {
        "a": 1e300, "b": -1.0, "c": 3.25}  # b: a tie in step and time, larger value  # fmt: skip


def test_a_rewritten_batch_falls_back_and_skips_what_exists(tmp_path):
    """A flush retried after its rows were written (e.g. the commit succeeded, then an error):
    the bulk insert hits the primary key, hands over, and log_batch writes nothing twice."""
    db = tmp_path / "m.db"
    client = open_client(f"sqlite:///{db}")
    exp = get_or_create_experiment(client, "bulk", f"sqlite:///{db}")
    run = client.create_run(exp).info.run_id
    first, _ = batches()
    assert write_metrics(client, run, first)
    before = rows(db, run)
    assert not write_metrics(client, run, first)
    client.log_batch(run, metrics=first)
    assert rows(db, run) == before


def test_run_logger_flush_uses_it_and_stores_the_same(tmp_path):
    db = tmp_path / "m.db"
    uri = f"sqlite:///{db}"
    client = open_client(uri)
    exp = get_or_create_experiment(client, "bulk", uri)
    ids = [client.create_run(exp).info.run_id for _ in range(2)]
    logger = RunLogger(ids[0], uri, flush_every=7, client=client)
    for step in range(20):
        logger.log_metrics({"loss": 1.0 / (step + 1), "snr": float(step)}, step=step)
    logger.flush()
    assert logger._pending == []
    ref = [Metric(m.key, m.value, m.timestamp, m.step) for m in _points(client, ids[0])]
    client.log_batch(ids[1], metrics=ref)
    assert rows(db, ids[0]) == rows(db, ids[1])
    assert len(rows(db, ids[0])[0]) == 40


def _points(client, run_id):
    return [m for key in ("loss", "snr") for m in client.get_metric_history(run_id, key)]


def test_a_deleted_run_is_refused_as_log_batch_refuses_it(tmp_path):
    from mlflow.exceptions import MlflowException

    db = tmp_path / "m.db"
    client = open_client(f"sqlite:///{db}")
    exp = get_or_create_experiment(client, "bulk", f"sqlite:///{db}")
    run = client.create_run(exp).info.run_id
    client.delete_run(run)
    with pytest.raises(MlflowException):
        write_metrics(client, run, [Metric("a", 1.0, 0, 0)])


@pytest.mark.parametrize(
    "bad",
    [
        Metric("a", 1.0, -5, 1),  # a negative timestamp on a key already checked in the batch
        Metric("a/../b", 1.0, 5, 1),  # a key MLflow refuses
        Metric("x" * 300, 1.0, 5, 1),  # too long
    ],
)
def test_bulk_refuses_what_log_batch_refuses(tmp_path, bad):
    from mlflow.exceptions import MlflowException

    db = tmp_path / "m.db"
    client = open_client(f"sqlite:///{db}")
    exp = get_or_create_experiment(client, "bulk", f"sqlite:///{db}")
    run = client.create_run(exp).info.run_id
    batch = [Metric("a", 0.5, 5, 0), bad]
    with pytest.raises(MlflowException):
        client.log_batch(run, metrics=batch)
    with pytest.raises(MlflowException):
        write_metrics(client, run, batch)
    assert rows(db, run) == [[], []]

"""Metric points into a SQL store in one ``executemany`` instead of one ORM object each.

``MlflowClient.log_batch`` on a SQLAlchemy store builds an ORM ``SqlMetric`` per point and lets
the unit of work insert them: ~0.1 ms of Python per point, ~1 CPU-s of a 200-step table2 job's
~8 (issue 28). :func:`write_metrics` writes the same rows — same table, same sanitized values,
same duplicate rule, the same ``latest_metrics`` update, in one transaction on the run, checked
active as MLflow checks it — with one bulk insert. It returns False (the caller then uses
``log_batch``) wherever it is not the same: a store that is not MLflow's SQLAlchemy store (a
server, a file store), an MLflow whose store lacks what it uses, a fluent active model (its
metrics would also be logged as model metrics). A batch whose rows already exist (a retried
flush) rolls back and is handed to ``log_batch``, which skips what exists.
``tests/tracking/test_bulk.py`` compares the stored rows with ``log_batch``'s, value for value.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace


def _sql_store(client):
    """The client's store if it is MLflow's SQLAlchemy store with everything used here; else None."""
    try:
        from mlflow.store.tracking.dbmodels.models import SqlMetric  # noqa: F401
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.tracking.fluent import get_active_model_id
    except ImportError:
        return None
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    need = ("ManagedSessionMaker", "_get_run", "_check_run_is_active", "sanitize_metric_value")
    if not isinstance(store, SqlAlchemyStore) or not all(hasattr(store, n) for n in need):
        return None
    if not hasattr(store, "_update_latest_metrics_if_necessary") or get_active_model_id() is not None:
        return None
    return store


def write_metrics(client, run_id: str, metrics: Sequence) -> bool:
    """Write ``metrics`` (``mlflow.entities.Metric``) into run ``run_id`` as ``log_batch`` would;
    False: not done (not this kind of store, or rows already there), call ``log_batch``.
    Call under :func:`~arenabench.tracking.store.lock_for`."""
    store = _sql_store(client)
    if store is None or any(getattr(m, "model_id", None) for m in metrics):
        return False
    import sqlalchemy
    from mlflow.store.tracking.dbmodels.models import SqlMetric
    from mlflow.utils.validation import _validate_metric

    rows, seen, latest, keys = [], set(), {}, set()
    for idx, m in enumerate(metrics):
        # MLflow's checks: the key's (name, length) once per key; a point of a checked key with
        # a float value and int timestamp >= 0 and step passes the rest by its types alone
        plain = type(m.value) is float and type(m.timestamp) is int and type(m.step) is int
        if not (plain and m.timestamp >= 0 and m.key in keys):
            _validate_metric(m.key, m.value, m.timestamp, m.step, path=f"metrics[{idx}]")
            keys.add(m.key)
        if m in seen:  # MLflow's rule: an identical point in one batch is written once
            continue
        seen.add(m)
        is_nan, value = store.sanitize_metric_value(m.value)
        row = {"run_uuid": run_id, "key": m.key, "value": value, "timestamp": m.timestamp,
               "step": m.step, "is_nan": is_nan}  # fmt: skip
        rows.append(row)
        best = latest.get(m.key)
        if best is None or (m.step, m.timestamp, value) > (best.step, best.timestamp, best.value):
            latest[m.key] = SimpleNamespace(**row)
    if not rows:
        return True
    with store.ManagedSessionMaker(read_only=False) as session:
        store._check_run_is_active(store._get_run(run_uuid=run_id, session=session))
        try:
            _insert(session, SqlMetric.__table__, rows)
            # MLflow's own update: per key, the newest point by (step, timestamp, value)
            store._update_latest_metrics_if_necessary(list(latest.values()), session)
            session.commit()
        except sqlalchemy.exc.IntegrityError:
            session.rollback()
            return False
    return True


def _insert(session, table, rows: list[dict]) -> None:
    """``INSERT`` the rows in one ``executemany``: on sqlite straight through the driver (the
    same statement and values; SQLAlchemy's per-row parameter processing was about a quarter of
    the insert's CPU in the issue-28 round-4 profile, the rest sqlite's own), elsewhere through
    SQLAlchemy."""
    conn = session.connection()
    if conn.dialect.name != "sqlite" or conn.dialect.paramstyle != "qmark":
        session.execute(table.insert(), rows)
        return
    cols = list(rows[0])
    sql = f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    conn.exec_driver_sql(sql, [tuple(r[c] for c in cols) for r in rows])

"""One row per run: the per-run values behind a published table (``runs_table``, written as
``results/train/<experiment>_runs.csv``) and a rerun checked against them run by run
(``diff_runs``, ``diff_summary``: ``arenabench compare --against``)."""

from __future__ import annotations

import math

import pandas as pd

from arenabench.compare.arms import run_values
from arenabench.compare.runs import RunSelection, history

RUN_KEYS = ("arm", "seed")  # what identifies a run of a committed per-run table (+ group_size)


def _pooled_rate(client, run_id: str, rate: str, count: str) -> float:
    """Σ rate·count / Σ count over a run's steps (e.g. ties per answered comparison over the whole
    run: steps with no comparison weigh nothing); NaN when nothing was counted."""
    r, c = history(client, run_id, rate), history(client, run_id, count)
    m = r.merge(c, on="step", suffixes=("_r", "_c"))
    total = float(m["value_c"].sum())
    return float((m["value_r"] * m["value_c"]).sum() / total) if total > 0 else math.nan


def runs_table(
    experiment: str | RunSelection,
    metrics,
    uri: str | None = None,
    sweep: str = "latest",
    by: str = "setting",
    where: dict[str, str] | None = None,
    pooled: dict[str, tuple[str, str]] | None = None,
    params: tuple[str, ...] = (),
) -> pd.DataFrame:
    """The per-run values behind a published table, one row per run: ``arm`` (the ``by`` tag;
    ``arm_by`` names it), ``seed``, ``run_id``, ``init_sha256`` (the start's content hash),
    ``judge_calls``, and per metric ``<m>_final``, ``<m>_auc``, ``<m>_points`` (logged values) and
    ``<m>_nan_steps`` (steps it was not finite); ``pooled={name: (rate, count)}`` adds Σ rate·count
    / Σ count over the run (e.g. ``tie_rate``); ``params``: run params as columns (dots → ``_``).
    Written as ``results/train/<experiment>_runs.csv`` and read back by :func:`diff_runs`.
    ``experiment`` may be a :class:`RunSelection` instead of the arguments that make one."""
    metrics = list(metrics)
    selection = RunSelection.of(experiment, uri, sweep, where=where)
    first = run_values(selection, metrics[0], by=by)
    out = first[["arm", "seed", "run_id", "init_sha256", "judge_calls"]].copy()
    out.insert(1, "arm_by", by)
    for m in metrics:
        v = first if m == metrics[0] else run_values(selection, m, by=by)
        v = v.set_index("run_id")
        for q in ("final", "auc", "points", "nan_steps"):
            out[f"{m}_{q}"] = out["run_id"].map(v[q])
    if pooled or params:
        client = selection.client()
        for name, (rate, count) in (pooled or {}).items():
            out[name] = [_pooled_rate(client, r, rate, count) for r in out["run_id"]]
        for p in params:
            got = [client.get_run(r).data.params.get(p) for r in out["run_id"]]
            out[p.replace(".", "_")] = got
    out = out.sort_values(["arm", "seed"], key=lambda c: c.map(_natural), kind="stable")
    out.attrs.update(experiment=selection.experiment, by=by, metrics=metrics)
    return out.reset_index(drop=True)


def _natural(v):
    s = str(v)
    return (0, int(s), "") if s.lstrip("-").isdigit() else (1, 0, s)


def diff_runs(committed: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """Run by run (matched on arm, seed and, where both have it, group_size): every quantity both
    tables hold — numbers and the ``init_sha256`` hash — committed vs rerun, their difference and
    ``same`` (exactly equal: bit for bit, as CSV floats round-trip). Runs present on one side only
    appear with the other side empty."""
    keys = [*RUN_KEYS, *(["group_size"] if {"group_size"} <= set(committed) & set(rerun) else [])]
    skip = {*keys, "arm_by", "run_id", "experiment", "init_source"}
    shared = [c for c in committed.columns if c in rerun.columns and c not in skip]
    a = committed.assign(**{k: committed[k].astype(str) for k in keys})
    b = rerun.assign(**{k: rerun[k].astype(str) for k in keys})
    m = a.merge(b, on=keys, how="outer", suffixes=("@committed", "@rerun"), indicator=True)
    rows = []
    for _, r in m.iterrows():
        for c in shared:
            x, y = r[f"{c}@committed"], r[f"{c}@rerun"]
            num = c != "init_sha256"
            if num:
                x, y = pd.to_numeric(x, errors="coerce"), pd.to_numeric(y, errors="coerce")
                same = (x == y) or (math.isnan(x) and math.isnan(y) and r["_merge"] == "both")
                d = y - x
            else:
                same, d = (x == y) and isinstance(x, str), math.nan
            rows.append(
                {**{k: r[k] for k in keys}, "quantity": c, "committed": x, "rerun": y, "diff": d,
                 "same": bool(same), "present": str(r["_merge"]).replace("_only", "")}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=[*keys, "quantity", "committed", "rerun", "diff", "same", "present"])


def diff_summary(diff: pd.DataFrame) -> str:
    """A few lines: runs matched, how many are identical in every quantity, the checkpoint hashes,
    and per quantity the largest |difference| and the mean difference (rerun − committed)."""
    keys = [c for c in (*RUN_KEYS, "group_size") if c in diff]
    both = diff[diff["present"] == "both"]
    per_run = both.groupby(keys)["same"].all()
    lines = [
        f"{len(per_run)} runs in both; {int(per_run.sum())} identical in every quantity; "
        f"{diff[diff['present'] != 'both'].groupby(keys).ngroups} on one side only"
    ]
    h = both[both["quantity"] == "init_sha256"]
    if len(h):
        lines.append(f"checkpoint hash (init_sha256) equal in {int(h['same'].sum())} of {len(h)} runs")
    for q, g in both[both["quantity"] != "init_sha256"].groupby("quantity", sort=False):
        d = g["diff"].astype(float)
        if d.notna().any():
            lines.append(
                f"{q}: {int(g['same'].sum())}/{len(g)} identical, max |Δ| {d.abs().max():.3g}, "
                f"mean Δ {d.mean():+.3g}"
            )
    return "\n".join(lines)

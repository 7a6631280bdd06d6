"""Where the answers change under persistent and surface judge error (issue 39 item 4).

Three studies, one MLflow store (``results/mlflow.db`` unless ``--uri``):

1. **table2 under the persistent fits** (``scripts/regenerate_tables.sh`` stages
   ``persistent_table2`` / ``persistent_table2_hard``): do the tournaments' gains over pointwise
   survive an error that repeats, and does ArenaRL's topology order (RR ≥ SE > DE > Swiss > anchor)
   appear? Per judge: each arm's paired Δ vs pointwise, and the topologies' Δ vs anchor.
2. **hacking** (stage ``hacking``): task=hackable under each fitted judge's own length coefficient.
   Per constructor: true-quality Δ vs pointwise, the surface feature's drift and the judge-view −
   truth gap, final and at mid-run.
3. **phase diagram** (``phase`` below): the gain of each constructor over pointwise (final true
   quality, paired by seed) on a grid of (persistent share, β) on task=hackable, each fitted judge
   marked on it.

The grid, fixed before any run from the recorded statistics (``results/judges/persistence.md``):
the base judge is the GPT-4 persistent fit (its grid, cutpoints, position bias and latent scale).
The *persistent share* r is the part of a comparison's error variance that repeats, r =
2 persistent_sd² / (pair_noise² + 2 persistent_sd²) (a comparison's difference carries both
responses' persistent draws). A cell holds each call's error variance at the base fit's: a
comparison's, pair_noise² + 2 persistent_sd², and a score's, point_noise² + persistent_sd²; only
how much of it repeats changes (fitted: GPT-4 0.82, ChatGPT 0.65). β (latent units per SD of the
surface feature) spans no surface error, about the fits' values (GPT-4 0.49; ChatGPT 1.02 on its
own scale, 1.84 in GPT-4's latent units) and beyond. Four arms (pointwise, anchor, seeded
single-elim, round-robin), 10 seeds, 200 steps, eval every 20. (A first grid, 2026-12-05, held
persistent_sd² + pair_noise² fixed instead, so its comparison error grew along the share axis;
replaced by this one, its cells ``phase_s*`` left in the store.)

    python experiments/persistence_study.py phase            # the grid's sweeps (~20 min on 2 idle cores)
    python experiments/persistence_study.py report --out results/judges
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table2_report import PERSISTENT, fmt, fmt_p  # noqa: E402

from arenabench import stats  # noqa: E402
from arenabench.compare import run_values  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BASE_JUDGE = "gpt4_llmbar_persistent"
SHARES = (0.0, 0.5, 0.9)
BETAS = (0.0, 1.0, 2.0)
PHASE_ARMS = ("pointwise", "anchor", "seeded_single_elim", "round_robin")
BY = "reward"
PRIMARY = "eval_sampled_quality"
LABELS = {
    "gpt4_llmbar_persistent": "GPT-4, LLMBar (persistent fit)",
    "chatgpt_llmbar_persistent": "ChatGPT, LLMBar (persistent fit)",
    "gpt4_llmbar": "GPT-4, LLMBar (fresh-error fit)",
    "chatgpt_llmbar": "ChatGPT, LLMBar (fresh-error fit)",
    "chatgpt_share0": "ChatGPT, LLMBar (persistent fit, its error made fresh)",
}
# the hard task's control: each persistent fit's fresh-error twin (the same judge fitted without the
# persistent and length terms; stage fresh_table2_hard), judge by judge
# and, since the ChatGPT twins differ in more than persistence (the persistent fit's per-comparison
# error and position bias are larger), the persistent fit itself with its error made fresh at the
# same error per call (persistent_sd 0, pair_noise = √(pair_noise² + 2 persistent_sd²): a
# comparison's difference carries both responses' persistent draws; point_noise =
# √(point_noise² + persistent_sd²); stage share0_table2_hard): the difference to the persistent fit
# is persistence alone
HARD_JUDGES = tuple(x for j in PERSISTENT for x in (j.removesuffix("_persistent"), j)) + ("chatgpt_share0",)
STAGE = {"table2": "persistent_table2", "table2_hard": "persistent_table2_hard"}
SHARE0_JUDGE = "chatgpt_llmbar_persistent"  # the judge of the chatgpt_share0 control


def judge_conf(name: str) -> dict:
    return yaml.safe_load((ROOT / "conf" / "judge" / f"{name}.yaml").read_text())


def comparison_share(c: dict) -> float:
    """The part of a comparison's error variance that repeats: 2 psd² / (pair² + 2 psd²)."""
    rep = 2.0 * c["persistent_sd"] ** 2
    return rep / (c["pair_noise"] ** 2 + rep)


def cell_overrides(share: float, beta: float, base: dict) -> dict[str, float]:
    """The base judge with comparison-level persistent share ``share``, every call's error
    variance (a comparison's, pair² + 2 psd²; a score's, point² + psd²) held at the base's."""
    pair_total = base["pair_noise"] ** 2 + 2.0 * base["persistent_sd"] ** 2
    point_total = base["point_noise"] ** 2 + base["persistent_sd"] ** 2
    psd2 = share * pair_total / 2.0
    if psd2 > point_total:
        raise ValueError(f"share {share:g}: the persistent variance exceeds a score's error variance")
    return {
        "persistent_sd": round(math.sqrt(psd2), 6),
        "pair_noise": round(math.sqrt((1.0 - share) * pair_total), 6),
        "point_noise": round(math.sqrt(point_total - psd2), 6),
        "surface_beta": beta,
    }


def share0_overrides() -> dict[str, float]:
    """The hard task's share-0 control (stage ``share0_table2_hard``): ChatGPT's persistent fit
    with no error repeating at its own error per call, i.e. its share-0 cell (surface term
    untouched: task=hard has no surface feature)."""
    ov = cell_overrides(0.0, 0.0, judge_conf(SHARE0_JUDGE))
    del ov["surface_beta"]
    return ov


def cell_name(share: float, beta: float) -> str:
    return f"phase_r{share:g}_b{beta:g}"


def judge_point(name: str, base: dict) -> tuple[float, float]:
    """A fitted judge's (comparison-level persistent share, β) in the base judge's latent units
    (β × its latent scale / the base's: the same surface effect on the true-quality scale)."""
    c = judge_conf(name)
    return comparison_share(c), c["surface_beta"] * c["quality_scale"] / base["quality_scale"]


def run_phase(uri: str, seeds: str, python: str) -> None:
    base = judge_conf(BASE_JUDGE)
    for share in SHARES:
        for beta in BETAS:
            name = cell_name(share, beta)
            ov = cell_overrides(share, beta, base)
            cmd = [
                python, "-m", "arenabench.train", "-m", "experiment=hacking", f"judge={BASE_JUDGE}",
                f"name={name}", f"reward={','.join(PHASE_ARMS)}", f"seed={seeds}", "eval_every=20",
                "progress=false", f"tracking.uri={uri}",
                f"hydra.sweep.dir=results/hydra/multirun/{name}/tables",
                *(f"judge.{k}={v}" for k, v in ov.items()),
            ]  # fmt: skip
            print("==", name, ov, flush=True)
            subprocess.run(cmd, check=True, cwd=ROOT)


# --- report ----------------------------------------------------------------------------------


def _values(
    experiment: str, uri: str, metric: str = PRIMARY, runs: list | None = None
) -> pd.DataFrame | None:
    """run_values' per-run rows (None if the experiment is not in the store); the primary metric's
    rows are also appended to ``runs`` (the report's one-row-per-run csv)."""
    try:
        v = run_values(experiment, metric, uri=uri, by=BY)
    except ValueError:
        return None
    if runs is not None:
        runs.append(v.drop(columns="points").assign(experiment=experiment, metric=metric))
    return v


def _tokens(experiment: str, uri: str, calls: pd.Series) -> dict[str, float]:
    """Per arm, the mean over seeds of a run's judge tokens (prefill + decode; {} if not logged).
    An arm whose runs asked the judge (``calls``: judge calls per run by arm) but billed nothing
    ran before the simulators billed pointwise prompts (issue 41): its tokens were not counted, so
    NaN, not 0."""
    parts = [_values(experiment, uri, f"judge_{k}_tokens_total") for k in ("prompt", "completion")]
    if any(x is None for x in parts):
        return {}
    total = parts[0].groupby("arm")["final"].mean() + parts[1].groupby("arm")["final"].mean()
    return {a: (math.nan if t == 0 and calls.get(a, 0) > 0 else t) for a, t in total.items()}


def _millions(x: float) -> str:
    return "not counted" if math.isnan(x) else f"{x / 1e6:.2f}"


def _paired(v: pd.DataFrame, arm: str, base: str, col: str = "final") -> dict:
    a = v[v.arm == arm].set_index("seed")[col]
    b = v[v.arm == base].set_index("seed")[col]
    seeds = sorted(set(a.index) & set(b.index), key=int)
    return stats.paired_t(a.loc[seeds].to_numpy(), b.loc[seeds].to_numpy())


def _cell(d: dict) -> str:
    return f"{fmt(d['mean'], d['lo'], d['hi'], signed=True)} (p {fmt_p(d['p'])})"


def table2_section(uri: str, design: str, runs: list, judges=PERSISTENT) -> tuple[list[str], list[dict]]:
    lines, rows = [], []
    for j in judges:
        exp = f"{design}_{j}"
        v = _values(exp, uri, runs=runs)
        if v is None:
            stage = (
                STAGE[design]
                if j in PERSISTENT
                else "share0_table2_hard"
                if j == "chatgpt_share0"
                else f"fresh_{design}"
            )
            lines += [f"- `{exp}`: not in the store (run `STAGES={stage} make tables`).", ""]
            continue
        calls = v.groupby("arm")["judge_calls"].mean()
        tokens = _tokens(exp, uri, calls)
        n_seeds = v.groupby("arm")["seed"].nunique()
        lines += [
            f"### {LABELS[j]} — `{exp}` ({len(v)} runs, "
            f"{int(n_seeds.min())}–{int(n_seeds.max())} seeds per arm)",
            "",
            "| arm | final true quality | Δ vs pointwise (final) | Δ vs pointwise (AUC) "
            "| Δ vs anchor (final) | judge calls / run | judge tokens / run (M) |",
            "|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for arm in sorted(v.arm.unique(), key=lambda a: (a != "pointwise", a)):
            ti = stats.t_interval(v[v.arm == arm]["final"].to_numpy())
            dp = _paired(v, arm, "pointwise") if arm != "pointwise" else None
            da = _paired(v, arm, "pointwise", "auc") if arm != "pointwise" else None
            dn = (
                _paired(v, arm, "anchor")
                if arm not in ("pointwise", "anchor") and "anchor" in set(v.arm)
                else None
            )
            row = {"experiment": exp, "judge": j, "arm": arm, "final": ti["mean"], "final_lo": ti["lo"],
                   "final_hi": ti["hi"], "judge_calls": calls[arm],
                   "judge_tokens": tokens.get(arm, math.nan)}  # fmt: skip
            for key, d in (("d_pointwise", dp), ("d_pointwise_auc", da), ("d_anchor", dn)):
                if d is not None:
                    row |= {key: d["mean"], f"{key}_lo": d["lo"], f"{key}_hi": d["hi"], f"{key}_p": d["p"]}
            rows.append(row)
            lines.append(
                f"| {arm} | {fmt(ti['mean'], ti['lo'], ti['hi'])} | {_cell(dp) if dp else '—'} | "
                f"{_cell(da) if da else '—'} | {_cell(dn) if dn else '—'} | {calls[arm]:.0f} | "
                f"{_millions(tokens.get(arm, math.nan))} |"
            )
        lines.append("")
    return lines, rows


# ArenaRL's Table 2 order of topologies, best first (RR >= SE > DE > Swiss > anchor): each link is
# tested as a paired difference of final true quality, the better-claimed arm minus the next
CHAIN = ("round_robin", "seeded_single_elim", "double_elim", "swiss", "anchor")
LINKS = tuple(zip(CHAIN, CHAIN[1:], strict=False))


def chain_section(uri: str, design: str, judges=PERSISTENT) -> tuple[list[str], list[dict]]:
    """Per judge: each adjacent link of ArenaRL's order as a paired Δ (final), and whether the
    data agree with it (the Δ's 95% CI lies above 0), are consistent with it (``≥``, RR vs SE only:
    the CI covers 0), contradict it (the CI lies below 0) or cannot tell (``>``: the CI covers 0)."""
    lines = ["| judge | " + " | ".join(f"{a} − {b}" for a, b in LINKS) + " |",
             "|---|" + "---|" * (len(CHAIN) - 1)]  # fmt: skip
    rows = []
    for j in judges:
        v = _values(f"{design}_{j}", uri)
        if v is None or not set(CHAIN) <= set(v.arm):
            continue
        cells = []
        for k, (a, b) in enumerate(LINKS):
            d = _paired(v, a, b)
            claim = "≥" if k == 0 else ">"
            if d["lo"] > 0:
                verdict = "agrees"
            elif d["hi"] < 0:
                verdict = "contradicts"
            else:
                verdict = "consistent" if claim == "≥" else "cannot tell"
            rows.append({"experiment": f"{design}_{j}", "judge": j, "better": a, "worse": b,
                         "claim": claim, "d": d["mean"], "d_lo": d["lo"], "d_hi": d["hi"], "d_p": d["p"],
                         "verdict": verdict})  # fmt: skip
            cells.append(f"{_cell(d)}: {verdict}")
        lines.append(f"| {LABELS[j]} | " + " | ".join(cells) + " |")
    if not rows:
        return [], []
    return [
        f"**ArenaRL's order** (RR ≥ SE > DE > Swiss > anchor, its Table 2) on `{design}`: each link's "
        "paired Δ of final true quality (better-claimed arm − the next): *agrees* when its 95% CI lies "
        "above 0, *contradicts* when it lies below 0; a CI covering 0 is *consistent* with RR ≥ SE and "
        "*cannot tell* for a strict link.",
        "",
        *lines,
        "",
    ], rows


def _curve_value(exp: str, uri: str, metric: str, step: int) -> pd.DataFrame | None:
    """Per run: the metric's logged value at the last logged step ≤ ``step``."""
    from arenabench.compare import RunSelection, run_curves  # the same curves run_values pools

    try:
        runs, curves, _ = run_curves(RunSelection(exp, uri), metric, BY)
    except ValueError:
        return None
    out = []
    for idx in runs.index:
        s, val = curves[idx]
        k = np.searchsorted(s, step, side="right") - 1
        out.append({"arm": runs.loc[idx, BY], "seed": runs.loc[idx, "seed"], "value": val[max(k, 0)]})
    return pd.DataFrame(out)


def hacking_section(uri: str, runs: list) -> tuple[list[str], list[dict]]:
    lines, rows = [], []
    for j in PERSISTENT:
        exp = f"hacking_{j}"
        q = _values(exp, uri, runs=runs)
        if q is None:
            lines += [f"- `{exp}`: not in the store (run `STAGES=hacking make tables`).", ""]
            continue
        surf = _values(exp, uri, "eval_sampled_surface")
        view = _values(exp, uri, "eval_sampled_judge_view")
        mid = _curve_value(exp, uri, "eval_sampled_surface", 100)
        lines += [
            f"### {LABELS[j]} — `{exp}` "
            f"(β = {judge_conf(j)['surface_beta']:.3g} latent units per SD, fitted)",
            "",
            "| arm | final true quality | Δ vs pointwise | surface at step 100 | final surface "
            "| final judge view − truth | judge calls / run |",
            "|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for arm in sorted(q.arm.unique(), key=lambda a: (a != "pointwise", a)):
            ti = stats.t_interval(q[q.arm == arm]["final"].to_numpy())
            d = _paired(q, arm, "pointwise") if arm != "pointwise" else None
            s_fin = stats.t_interval(surf[surf.arm == arm]["final"].to_numpy()) if surf is not None else None
            s_mid = stats.t_interval(mid[mid.arm == arm]["value"].to_numpy()) if mid is not None else None
            gap = None
            if view is not None and arm in set(view.arm):
                vv = view[view.arm == arm].set_index("seed")["final"]
                qq = q[q.arm == arm].set_index("seed")["final"]
                gap = stats.t_interval((vv - qq.loc[vv.index]).to_numpy())
            rows.append(
                {
                    "judge": j,
                    "arm": arm,
                    "final": ti["mean"],
                    "d_pointwise": d["mean"] if d else math.nan,
                    "d_pointwise_lo": d["lo"] if d else math.nan,
                    "d_pointwise_hi": d["hi"] if d else math.nan,
                    "surface_mid": s_mid["mean"] if s_mid else math.nan,
                    "surface_final": s_fin["mean"] if s_fin else math.nan,
                    "view_minus_truth": gap["mean"] if gap else math.nan,
                }  # fmt: skip
            )

            def ci(t):
                return fmt(t["mean"], t["lo"], t["hi"], signed=True) if t else "—"

            lines.append(
                f"| {arm} | {fmt(ti['mean'], ti['lo'], ti['hi'])} | {_cell(d) if d else '—'} | "
                f"{ci(s_mid)} | {ci(s_fin)} | {ci(gap)} | {q[q.arm == arm]['judge_calls'].mean():.0f} |"
            )
        lines.append("")
    return lines, rows


def phase_section(uri: str, out: Path, runs: list) -> tuple[list[str], list[dict]]:
    base = judge_conf(BASE_JUDGE)
    rows = []
    for share in SHARES:
        for beta in BETAS:
            v = _values(cell_name(share, beta), uri, runs=runs)
            calls = v.groupby("arm")["judge_calls"].mean() if v is not None else {}
            surf = _values(cell_name(share, beta), uri, "eval_sampled_surface")
            surface = surf.groupby("arm")["final"].mean() if surf is not None else {}
            for arm in PHASE_ARMS[1:]:
                if v is None or arm not in set(v.arm):
                    rows.append({"share": share, "beta": beta, "arm": arm, "d": math.nan, "lo": math.nan,
                                 "hi": math.nan, "p": math.nan, "pointwise": math.nan,
                                 "calls": math.nan, "pointwise_calls": math.nan, "surface": math.nan,
                                 "pointwise_surface": math.nan})  # fmt: skip
                    continue
                d = _paired(v, arm, "pointwise")
                pw = v[v.arm == "pointwise"]["final"].mean()
                rows.append({"share": share, "beta": beta, "arm": arm, "d": d["mean"], "lo": d["lo"],
                             "hi": d["hi"], "p": d["p"], "pointwise": pw, "calls": calls[arm],
                             "pointwise_calls": calls["pointwise"], "surface": surface.get(arm, math.nan),
                             "pointwise_surface": surface.get("pointwise", math.nan)})  # fmt: skip
    df = pd.DataFrame(rows)
    if df["d"].isna().all():
        return [
            "- the phase grid is not in the store (run `python experiments/persistence_study.py phase`)."
        ], rows
    marks = {j: judge_point(j, base) for j in PERSISTENT}
    _phase_figure(df, marks, out / "persistence_phase.png")
    lines = [
        "| persistent share r | β (latent / SD) | pointwise final | "
        + " | ".join(f"Δ {a}" for a in PHASE_ARMS[1:])
        + " | final surface (" + ", ".join(PHASE_ARMS) + ") | judge calls / run (same order) |",
        "|---|---|---|" + "---|" * (len(PHASE_ARMS) + 1),
    ]  # fmt: skip
    for (share, beta), g in df.groupby(["share", "beta"], sort=True):
        g = g.set_index("arm")
        cells = [
            f"{fmt(g.loc[a, 'd'], g.loc[a, 'lo'], g.loc[a, 'hi'], signed=True)} (p {fmt_p(g.loc[a, 'p'])})"
            for a in PHASE_ARMS[1:]
        ]
        calls = ", ".join(
            f"{c:.0f}" for c in [g["pointwise_calls"].iloc[0], *g.loc[list(PHASE_ARMS[1:]), "calls"]]
        )
        surf = ", ".join(
            f"{x:+.2f}" for x in [g["pointwise_surface"].iloc[0], *g.loc[list(PHASE_ARMS[1:]), "surface"]]
        )
        lines.append(
            f"| {share:g} | {beta:g} | {fmt(g['pointwise'].iloc[0])} | "
            + " | ".join(cells)
            + f" | {surf} | {calls} |"
        )
    lines += ["", *_phase_read(df)]
    lines += ["", "Fitted judges on this map (r, β in the base's latent units): "
              + "; ".join(f"{LABELS[j]} ({s:.2f}, {b:.2f})" for j, (s, b) in marks.items()), "",
              "![phase diagram](persistence_phase.png)", ""]  # fmt: skip
    return lines, rows


def _phase_read(df: pd.DataFrame) -> list[str]:
    """What the grid shows, every number read from ``df`` (the table above)."""

    def at(share, beta, col, arm="seeded_single_elim"):
        return df[(df.share == share) & (df.beta == beta) & (df.arm == arm)][col].iloc[0]

    lo, hi = min(BETAS), max(BETAS)
    mid = sorted(BETAS)[1]
    gains = ", ".join(f"{at(r, lo, 'd'):+.3f} at r = {r:g}" for r in SHARES)
    drift = ", ".join(f"{at(r, mid, 'pointwise_surface'):+.2f} at r = {r:g}" for r in SHARES)
    top = df[df.beta == hi]

    def span(x, sign="+"):
        a, b = f"{x.min():{sign}.2f}", f"{x.max():{sign}.2f}"
        return a if a == b else f"{a} … {b}"

    return [
        f"**Read.** Without surface error (β = {lo:g}) seeded single-elimination's gain over pointwise falls "
        f"as more of the same per-call error repeats ({gains}): persistence alone, at fixed noise per "
        "call, takes the tournaments' advantage away (round-robin and anchor alike). At "
        f"β = {mid:g} the gain is larger where pointwise is exploited, and pointwise is exploited less "
        f"the more of the error repeats (its final surface {drift}; the SFT start ≈ −0.9). A new "
        "response's expected score is the same at every r (each call's error variance is held), so "
        "the difference lies in how the error repeats over a run's samples; which mechanism, this grid "
        f"does not isolate. At β = {hi:g} every arm is exploited: the tournaments reach the "
        f"all-filler end (surface {span(top['surface'])}) and trail pointwise (surface "
        f"{span(top['pointwise_surface'])}) by {-top['d'].max():.3f} … {-top['d'].min():.3f} at every r.",
    ]


def _phase_figure(df: pd.DataFrame, marks: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = PHASE_ARMS[1:]
    fig, axes = plt.subplots(1, len(arms), figsize=(4.2 * len(arms), 3.9), constrained_layout=True)
    lim = np.nanmax(np.abs(df["d"].to_numpy())) or 1.0
    for ax, arm in zip(axes, arms, strict=True):
        g = df[df.arm == arm].pivot(index="beta", columns="share", values="d").sort_index()
        im = ax.imshow(g.to_numpy(), origin="lower", cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_xticks(range(len(g.columns)), [f"{s:g}" for s in g.columns])
        ax.set_yticks(range(len(g.index)), [f"{b:g}" for b in g.index])
        for (i, b), (k, s) in ((x, y) for x in enumerate(g.index) for y in enumerate(g.columns)):
            r = df[(df.arm == arm) & (df.share == s) & (df.beta == b)].iloc[0]
            sig = "*" if r["p"] < 0.05 else ""
            ax.text(k, i, f"{r['d']:+.2f}{sig}", ha="center", va="center", fontsize=9)
        for j, (s, b) in marks.items():  # fractional grid position by linear interpolation
            x = np.interp(s, list(g.columns), range(len(g.columns)))
            y = np.interp(b, list(g.index), range(len(g.index)))
            ax.plot(x, y, marker="o", mfc="none", mec="k", ms=10)
            ax.annotate(
                LABELS[j].split(",")[0], (x, y), textcoords="offset points", xytext=(9, -13), fontsize=8
            )
        ax.set_title(f"{arm} − pointwise")
        ax.set_xlabel("repeating share of a comparison's error (fraction)")
        ax.set_ylabel("surface coefficient β (latent units per SD)")
    fig.colorbar(im, ax=axes, label="Δ final true quality vs pointwise (10 seeds, paired)")
    fig.suptitle(
        f"Phase diagram, task=hackable, base judge {BASE_JUDGE}: gain over pointwise (* p < 0.05)",
        fontsize=11,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


GRID_TEXT = "The grid, fixed before any run " + " ".join(
    __doc__.split("The grid, fixed before any run")[1].split("    python")[0].split()
)


def speed_line(bench: Path = ROOT / "results" / "bench" / "judge_sweep.json") -> list[str]:
    """The issue's speed standard, from ``benchmarks/judge_sweep_speed.py``'s last run."""
    if not bench.exists():
        return ["Speed: not measured (run `make bench-judge`).", ""]
    data = json.loads(bench.read_text())
    rows, meta = data["rows"], data["meta"]
    parts = [
        f"`{r['judge']}` {r['wall_s'] / 60:.2f} min wall ({r['cpu_s'] / 2 / 60:.2f} min CPU / 2 cores, "
        f"load {r['load_before']:.1f} before)"
        for r in rows
    ]
    return [
        f"Speed ([bench](../bench/judge_sweep.md), `make bench-judge`): the {meta['seeds']}-seed table2 "
        f"sweep ({len(meta['arms'].split(','))} arms, {meta['steps']} steps) took {' vs '.join(parts)}; "
        "goal ≤ 5 min on 2 idle cores.",
        "",
    ]


def report(uri: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    runs: list[pd.DataFrame] = []
    t2, t2_rows = table2_section(uri, "table2", runs)
    t2h, t2h_rows = table2_section(uri, "table2_hard", runs, HARD_JUDGES)
    c2, c2_rows = chain_section(uri, "table2")
    c2h, c2h_rows = chain_section(uri, "table2_hard", HARD_JUDGES)
    hk, hk_rows = hacking_section(uri, runs)
    ph, ph_rows = phase_section(uri, out, runs)
    s0, c0 = share0_overrides(), judge_conf(SHARE0_JUDGE)
    if runs:  # one row per run: experiment, arm, seed, run id, final/AUC, judge calls, start checkpoint
        pd.concat(runs, ignore_index=True).to_csv(out / "persistence_runs.csv", index=False)
    pd.DataFrame(t2_rows + t2h_rows).to_csv(out / "persistence_table2.csv", index=False)
    pd.DataFrame(c2_rows + c2h_rows).to_csv(out / "persistence_order.csv", index=False)
    pd.DataFrame(hk_rows).to_csv(out / "persistence_hacking.csv", index=False)
    pd.DataFrame(ph_rows).to_csv(out / "persistence_phase.csv", index=False)
    text = [
        "# Training under persistent and surface judge error (issue 39 item 4)",
        "",
        "Generated by `python experiments/persistence_study.py report --out results/judges` from the "
        "sweeps of `scripts/regenerate_tables.sh` (stages `persistent_table2`, `persistent_table2_hard`, "
        "`hacking`) and `python experiments/persistence_study.py phase`. Every Δ is paired by seed "
        "(same SFT start, same prompt order; seeds 0–9) with its 95% t interval and p; *final* = the last "
        "eval's `eval_sampled_quality` (true quality of 16 samples per prompt), *AUC* = its area over the "
        "run. "
        "Judges: `conf/judge/*_persistent.yaml` (fits in [persistence.md](persistence.md)). One row per run "
        "(experiment, arm, seed, run id, final, AUC, judge calls, start checkpoint `init_sha256`): "
        "`persistence_runs.csv`. *Judge tokens / run (M)*: the prefill + decode tokens the fitted judge "
        "bills per run, in millions (the prompts an LLM judge would be sent under `tiny-bpe`, "
        "[docs/tokens.md](../../docs/tokens.md)); the fair budget between a listwise call and a pair's. "
        "*not counted*: the arm's runs predate the simulators' billing of pointwise prompts (issue 41); "
        "its calls are shown, its tokens were not counted.",
        "",
        *speed_line(),
        "## table2 (task=preference, init=sft)",
        "",
        *t2,
        *c2,
        "## table2_hard (task=hard, init=sft_hard)",
        "",
        "Each persistent fit beside its fresh-error twin (the same recorded judgments fitted without the "
        "persistent and length terms, `conf/judge/{gpt4,chatgpt}_llmbar.yaml`; stage `fresh_table2_hard`; "
        "the length term is inert here: task=hard has no surface feature). The twins differ in more than "
        "persistence: refitted jointly, ChatGPT's persistent fit has a larger per-comparison error "
        "(pair noise 0.665 and persistent SD 0.641 vs 0.127) and position bias (0.518 vs 0.095); GPT-4's "
        "differ less (0.400 and 0.611 vs 0.467; 0.068 vs 0.088). So the last table isolates persistence: "
        "ChatGPT's persistent fit with its error made fresh at the same error per call (persistent_sd 0; "
        f"pair_noise {s0['pair_noise']:.3f} = √({c0['pair_noise']:.3f}² + 2 × {c0['persistent_sd']:.3f}²): a "
        "comparison's difference carries both responses' persistent draws, and the listwise noise "
        f"follows pair_noise; point_noise {s0['point_noise']:.3f} = √({c0['point_noise']:.3f}² + "
        f"{c0['persistent_sd']:.3f}²); stage `share0_table2_hard`).",
        "",
        *t2h,
        *c2h,
        "## Hacking (task=hackable, init=sft_hackable; each judge's fitted β)",
        "",
        "*surface*: the mean filler feature of the sampled eval answers (z-score against a uniform "
        "response; the SFT start ≈ −0.9, all filler +7.5); *judge view − truth*: the judge's noise-free "
        "view minus true quality on the same answers (quality units).",
        "",
        *hk,
        "## Phase diagram (task=hackable)",
        "",
        GRID_TEXT,
        "",
        *ph,
    ]
    (out / "persistence_train.md").write_text("\n".join(text) + "\n")
    print(f"wrote {out / 'persistence_train.md'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("phase", help="run the grid's sweeps")
    p.add_argument("--uri", default="sqlite:///results/mlflow.db")
    p.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9")
    r = sub.add_parser("report", help="write persistence_train.md (+ csv, PNG)")
    r.add_argument("--uri", default="sqlite:///results/mlflow.db")
    r.add_argument("--out", default="results/judges")
    args = ap.parse_args(argv)
    if args.cmd == "phase":
        run_phase(args.uri, args.seeds, sys.executable)
    else:
        report(args.uri, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

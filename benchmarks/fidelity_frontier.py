"""Fidelity per judge call: the frontier, and the search for a ≤ 2N design that beats round-robin.

Every registered constructor (+ the fidelity study's variants) on the same simulated groups
(calibrated judge, seed 0), with standard errors over groups, and the change in Kendall τ vs
round-robin *paired* on the same groups (its SE is far smaller than either τ's). The search rows
are the sparse constructors (``arenabench/rewards/sparse.py``) by evidence type and budget; a
row "beats round-robin" when its comparisons are ≤ 2N and Δτ > 2 SE. Run:
``python benchmarks/fidelity_frontier.py [--quick]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arenabench import fidelity, judges, reporting, rewards

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]

BASELINE = "round_robin"
METRICS = ("kendall_tau", "spearman", "top1", "adv_corr")
COSTS = ("comparisons_per_group", "judge_calls_per_group", "waves")
# the judge's bill per group (docs/tokens.md): the simulated judge's exact prompt tokens under the
# tiny BPE, the share an ideal prefix cache serves, and the assumed verdict-only decode
TOKENS = {
    "prompt_tokens": "prefill_per_group",
    "cached_prompt_tokens": "cacheable_per_group",
    "completion_tokens": "decode_per_group",
}


@dataclass(frozen=True)
class Config:
    sizes: tuple[int, ...] = (8, 16)
    groups: int = 200
    judge: str = "calibrated"
    seed: int = 0
    chunk: int = 64  # groups per engine step, as K prompts of a training step


FULL = Config()
QUICK = Config(sizes=(8,), groups=12)


def search_specs(n: int) -> list[str]:
    """The candidates beyond the registered defaults: each evidence type, budgets 2N and all pairs."""
    every = n * (n - 1) // 2
    out = []
    for name in ("bt_bracket", "adaptive_pairs"):
        out += [f"{name}:outcome=verdict", f"{name}:outcome=score"]
    out += [f"adaptive_pairs:budget={2 * n}", f"adaptive_pairs:budget={2 * n}:outcome=score"]
    out += [f"adaptive_pairs:budget={every}", f"adaptive_pairs:budget={every}:outcome=score"]  # all pairs
    return out


def evaluate(spec: str, groups, cfg: Config) -> dict[str, np.ndarray]:
    """Per-group metrics and costs of one constructor on ``groups`` (``arenabench.fidelity.evaluate``,
    a fresh judge each time)."""
    judge = judges.get(cfg.judge, seed=cfg.seed)
    df, _ = fidelity.evaluate(rewards.from_spec(spec), groups, judge, seed=cfg.seed, chunk=cfg.chunk)
    out = {k: df[k].to_numpy(dtype=float) for k in (*METRICS, *COSTS)}
    out.update({name: np.array([judge.stats[k] / len(groups)]) for k, name in TOKENS.items()})
    return out


def _se(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def run(out: Path, quick: bool = False, only: str | None = None, m: dict | None = None) -> dict:
    cfg = QUICK if quick else FULL
    m = m or common.machine()
    rows: list[dict] = []
    for n in cfg.sizes:
        groups = common.groups_for(cfg.groups, n, seed=cfg.seed)
        specs = common.constructor_specs(only)
        specs = ([BASELINE] if BASELINE not in specs else []) + specs
        specs += [s for s in search_specs(n) if not only]
        base = evaluate(BASELINE, groups, cfg)
        for spec in specs:
            if common.skip_reason(spec, n):
                continue
            per = base if spec == BASELINE else evaluate(spec, groups, cfg)
            d = per["kendall_tau"] - base["kendall_tau"]
            row = {
                "group_size": n,
                "constructor": spec,
                "search": spec in search_specs(n) or spec.split(":")[0] in ("bt_bracket", "adaptive_pairs"),
                **{c: float(per[c].mean()) for c in COSTS},
                "kendall_tau": float(per["kendall_tau"].mean()),
                "tau_se": _se(per["kendall_tau"]),
                "d_tau_vs_rr": float(d.mean()),
                "d_tau_se": _se(d),
                "top1": float(per["top1"].mean()),
                "adv_corr": float(per["adv_corr"].mean()),
                **{c: float(per[c][0]) for c in TOKENS.values()},
            }
            sent = row["prefill_per_group"] + row["decode_per_group"]
            row["tau_per_1k_tokens"] = 1000 * row["kendall_tau"] / sent if sent else float("nan")
            row["le_2n"] = row["comparisons_per_group"] <= 2 * n
            row["beats_rr"] = bool(row["le_2n"] and row["d_tau_vs_rr"] > 2 * row["d_tau_se"])
            rows.append(row)
            common.progress(
                "fidelity",
                f"N={n:<3} {spec:<40} cmp={row['comparisons_per_group']:6.1f} "
                f"tau={row['kendall_tau']:.3f}±{row['tau_se']:.3f} "
                f"Δ={row['d_tau_vs_rr']:+.3f}±{row['d_tau_se']:.3f}",
            )
    common.save_csv(out, "fidelity_frontier.csv", rows)
    plot(rows, out / "fidelity_frontier.png", cfg)
    s = summarize(rows, cfg)
    _write_md(out, rows, s, cfg, m, quick)
    return s


def plot(rows: list[dict], path: Path, cfg: Config = FULL) -> None:
    """The frontier figure from the rows (or the committed csv's rows, :func:`replot`): Kendall τ
    with its 95% t interval over the groups (from ``tau_se``) against judge calls per group."""
    from scipy import stats

    q = float(stats.t.ppf(0.975, cfg.groups - 1))
    plotted = [{**r, "kendall_tau_ci95": q * float(r["tau_se"])} for r in rows]
    fidelity.plot_frontier(
        plotted, str(path),
        title=f"Fidelity per judge call — {reporting.judge_name(cfg.judge)}, {cfg.groups} simulated groups "
        "per N\n(Kendall τ vs the true order, mean over groups, 95% CI)",
    )  # fmt: skip


def replot(csv_path: Path = Path("results/bench/fidelity_frontier.csv"), out: Path | None = None) -> Path:
    """Redraw ``fidelity_frontier.png`` from a committed csv (no rerun)."""
    import csv

    with open(csv_path) as f:
        text = ("constructor", "search", "le_2n", "beats_rr")
        rows = [{k: (v if k in text else float(v)) for k, v in r.items()} for r in csv.DictReader(f)]
    for r in rows:
        r["group_size"] = int(r["group_size"])
    path = (out or csv_path.parent) / "fidelity_frontier.png"
    plot(rows, path)
    return path


ORACLES = ("oracle", "rank_oracle")


def summarize(rows: list[dict], cfg: Config) -> dict:
    s: dict = {"groups": cfg.groups, "by_n": {}}
    for n in cfg.sizes:
        sub = [r for r in rows if r["group_size"] == n]
        rr = next((r for r in sub if r["constructor"] == BASELINE), None)
        # the oracle controls read the hidden quality: references, not designs a judge could run
        cheap = [r for r in sub if r["le_2n"] and r["constructor"] not in (BASELINE, *ORACLES)]
        relative = [r for r in cheap if "outcome=score" not in r["constructor"]]
        best_rel = max(relative, key=lambda r: r["kendall_tau"], default=None)
        best_any = max(cheap, key=lambda r: r["kendall_tau"], default=None)
        s["by_n"][n] = {
            "rr_tau": rr["kendall_tau"] if rr else float("nan"),
            "rr_se": rr["tau_se"] if rr else float("nan"),
            "beats": [r["constructor"] for r in sub if r["beats_rr"] and r["constructor"] not in ORACLES],
            "best_relative": _brief(best_rel),
            "best_any": _brief(best_any),
        }
    return s


def _brief(r: dict | None) -> dict | None:
    if r is None:
        return None
    keys = ("constructor", "comparisons_per_group", "kendall_tau", "tau_se", "d_tau_vs_rr", "d_tau_se")
    return {k: r[k] for k in keys}


def _verdict(n: int, v: dict) -> str:
    rel, anyr = v["best_relative"], v["best_any"]
    line = f"- **N = {n}**: round-robin τ = {v['rr_tau']:.3f} ± {v['rr_se']:.3f}. "
    if rel:
        line += (
            f"Best ≤ 2N design on comparison evidence (verdicts or P(A)): `{rel['constructor']}` "
            f"({rel['comparisons_per_group']:.0f} comparisons) τ = {rel['kendall_tau']:.3f}, "
            f"Δ = {rel['d_tau_vs_rr']:+.3f} ± {rel['d_tau_se']:.3f}. "
        )
    if anyr and anyr is not rel and anyr["constructor"] != (rel or {}).get("constructor"):
        line += (
            f"Best ≤ 2N design overall: `{anyr['constructor']}` τ = {anyr['kendall_tau']:.3f}, "
            f"Δ = {anyr['d_tau_vs_rr']:+.3f} ± {anyr['d_tau_se']:.3f}. "
        )
    line += "Beats round-robin (Δ > 2 SE): " + (", ".join(f"`{b}`" for b in v["beats"]) or "none") + "."
    return line


def _write_md(out: Path, rows, s: dict, cfg: Config, m, quick: bool) -> None:
    cols = {
        "constructor": "constructor",
        "comparisons_per_group": "comparisons",
        "judge_calls_per_group": "judge calls",
        "waves": "waves",
        "prefill_per_group": "prefill tok",
        "cacheable_per_group": "cacheable tok",
        "decode_per_group": "decode tok",
        "tau_per_1k_tokens": "τ / 1k tok",
        "kendall_tau": "Kendall τ",
        "tau_se": "± SE",
        "d_tau_vs_rr": "Δτ vs round-robin (paired)",
        "d_tau_se": "± SE",
        "top1": "top-1",
        "adv_corr": "adv corr",
        "beats_rr": "beats RR at ≤ 2N",
    }
    body = [
        f"`{cfg.judge}` judge, {cfg.groups} simulated groups per N, seed {cfg.seed}, groups run "
        f"{cfg.chunk} per "
        "engine step. SE = std over groups / √groups; Δτ is paired on the same groups. Plot: "
        "[`fidelity_frontier.png`](fidelity_frontier.png).",
        "",
        "Tokens per group (docs/tokens.md): prefill = the exact prompt an LLM judge with the "
        "`open_writing` rubric is sent, counted with the tiny local BPE (vocabulary 1024; a "
        "production tokenizer counts fewer, ratios carry over); cacheable = what an ideal, "
        "unbounded prefix cache serves of it (system message, query, trajectory A shared); decode = "
        "an assumed verdict-only reply (~20 tokens). τ / 1k tok = Kendall τ per 1,000 prefill + "
        "decode tokens of a group. Pointwise rows count no tokens: the project has no pointwise "
        "judge prompt to count (their judge calls are the cost shown).",
        "",
        "### Does a ≤ 2N design beat round-robin?",
        "",
        *[_verdict(n, v) for n, v in s["by_n"].items()],
        "",
        "How to read `outcome=score`: it ranks by each side's own 0–10 score, which this simulator "
        "draws independently of the opponent (a per-side measurement, closer to a pointwise judge with "
        "pairwise noise than to a comparison); an LLM judge's scores are partly relative, so that gain "
        "may not transfer. Round-robin's win-rate rule drops the margins: the all-pairs rows "
        "(`budget=N(N−1)/2`) show what its comparisons hold under each aggregator.",
    ]
    body += common.quick_note(quick)
    parts = ["\n".join(body)]
    for n in cfg.sizes:
        sub = sorted(
            (r for r in rows if r["group_size"] == n), key=lambda r: (r["search"], r["judge_calls_per_group"])
        )
        parts.append(f"## N = {n}\n\n" + reporting.md_table(sub, cols))
    common.write_page(out, "fidelity_frontier.md", "Fidelity per judge call", m, "\n\n".join(parts), quick)


def main(argv=None) -> None:
    import sys

    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--replot"]:  # redraw the figure from the committed csv: --replot [CSV]
        print(replot(*(Path(a) for a in args[1:3])))
        return
    common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()

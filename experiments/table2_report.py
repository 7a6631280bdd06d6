"""Table 2 that answers (issue 14): per-experiment reports of the warm-start sweeps, read from MLflow.

For each experiment in the store (table2, snr_dynamics, table2_hard, table2_imperfect, group_size,
rrc, reasoning_arena) writes ``<out>/<experiment>.md`` (+ ``_stats.csv`` and PNGs) with
``arenabench.compare``'s statistics API: per arm the final ``eval_sampled_quality`` (primary) and its
area under the curve with t CIs over seeds, the paired difference by seed vs the experiment's
baseline arm (pointwise; PRC for rrc, plain verifier rewards for reasoning_arena; 95% CI, p-value),
greedy ``eval_quality`` beside it, judge calls per step, and the run-mean advantage–oracle
correlation. Run after the sweeps::

    python experiments/table2_report.py --out results/train [--experiments table2 snr_dynamics]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from arenabench.compare import (
    arm_stats,
    collapse_figure,
    curves_figure,
    load_runs,
    metric_curves,
    note_figure,
    paired_difference_figure,
    runs_table,
    select_runs,
    stats_frontier_figure,
    sweep_figure,
)
from arenabench.reporting import figure_title, metric_label
from arenabench.tracking import open_client, tracking_uri

BY = "reward"  # the conf/reward file: pointwise_budget's constructor is "pointwise"
PRIMARY = "eval_sampled_quality"
EXPERIMENTS = (
    "table2", "snr_dynamics", "table2_hard", "table2_imperfect", "group_size", "rrc", "reasoning_arena",
    "table2_gpt4_llmbar", "table2_chatgpt_llmbar", "table2_gpt4turbo_mtbench",
    "group_size_gpt4_llmbar", "group_size_chatgpt_llmbar", "group_size_gpt4turbo_mtbench",
    "table2_gpt4_llmbar_persistent", "table2_chatgpt_llmbar_persistent",
    "table2_hard_gpt4_llmbar_persistent", "table2_hard_chatgpt_llmbar_persistent",
    "hacking_gpt4_llmbar_persistent", "hacking_chatgpt_llmbar_persistent",
)  # fmt: skip
# the arm every other arm is paired against: the scoring rule each paper replaces
BASELINES = {"rrc": "prc", "reasoning_arena": "rlvr", "reasoning_arena_chain": "rlvr"}
JUDGES = {"rrc": "cot"}  # the simulated-judge preset of each experiment (default: calibrated)
JUDGE_NOTES = {
    "cot": (
        " The `cot` preset's verdicts and scores equal `calibrated`'s; its P(\"A\") — what PRC reads — "
        "is sigmoid(55 · judged latent difference), set so that ≈ 88% of probabilities against the greedy "
        "reference fall in [0, 0.1] ∪ [0.9, 1] (RRC's measured saturation): PRC's handicap here is that "
        "modelled saturation, an assumption of the same kind."
    ),
}
TITLES = {
    "table2": "table2: ArenaRL Table 2 on the warm start (init=sft, N = 8, K = 8)",
    "snr_dynamics": "snr_dynamics: discriminative collapse on the warm start (init=sft, N = 8, K = 8)",
    "table2_hard": "table2_hard: the hard task from its warm start (task=hard, init=sft_hard, N = 8, K = 8)",
    "hacking": "hacking: a judge the policy can hack (task=hackable, init=sft_hackable, N = 8, K = 8)",
    "table2_imperfect": "table2_imperfect: an imperfect teacher's warm start (init=sft_imperfect, N = K = 8)",
    "group_size": "group_size: N in {2, 4, 8, 16} (ArenaRL Fig. 4a), init=sft, K = 8",
    "rrc": "rrc: PRC vs SCR vs AGR, ± voting@3, ± CARA on the chain-of-thought judge (init=sft, N = K = 8)",
    "reasoning_arena": "reasoning_arena: RLVR with adaptive routing on vs off, CISPO (init=sft, N = K = 8)",
    "reasoning_arena_chain": "reasoning_arena_chain: Reasoning Arena where reasoning causes the answer — "
    "adaptive routing options vs rlvr, CISPO (task=chain, init=sft_chain, N = K = 8)",
}
# the objectives table's first paragraph, per design (default: the rlvr task's)
OBJECTIVES_NOTES = {
    "reasoning_arena_chain": (
        "The chain task (docs/training.md) has two objectives: the reasoning (judged; the quality above: "
        "0.5 + 1.5 × mean over the 6 steps of valid + 0.25 × preference value) and the verifiable answer "
        "(exact match of the state the chain reaches), which only an all-valid chain (or a ≈ 1/64 lucky "
        "cancellation) gets right. *Pass rate* = share of the 16 × 32 sampled eval responses (T = 1, the "
        "same draws as the sampled quality) that the verifier accepts; *greedy pass rate* = share of the "
        "32 greedy answers; *answer elsewhere* is 0 by construction on this task (the answer is computed, "
        "never emitted as a step)."
    ),
}


# per run (results/train/<experiment>_runs.csv): final and AUC of each, its logged points and NaN steps
RUN_METRICS = (PRIMARY, "eval_quality", "snr", "adv_oracle_pearson")
VERIFIER_METRICS = ("eval_pass_rate", "eval_greedy_pass_rate", "eval_answer_elsewhere")  # rlvr task
POOLED = {"tie_rate": ("judge_tie_rate", "judge_matches")}  # ties per answered comparison, whole run
RUN_PARAMS = ("init.seed",)  # the SFT seed: the teacher draw of an imperfect teacher


# a sweep rerun under a fitted judge is named <experiment>_<judge> (scripts/regenerate_tables.sh)
FITTED = ("gpt4_llmbar", "chatgpt_llmbar", "gpt4turbo_mtbench")
# fitted with persistent and surface (length) error (issue 39): matched first (longest suffix)
PERSISTENT = ("gpt4_llmbar_persistent", "chatgpt_llmbar_persistent")


def split_judge(experiment: str) -> tuple[str, str | None]:
    """(the experiment's design, the fitted judge it was rerun under, or None)."""
    for j in PERSISTENT + FITTED:
        if experiment.endswith(f"_{j}"):
            return experiment[: -len(j) - 1], j
    return experiment, None


def baseline(experiment: str) -> str:
    return BASELINES.get(split_judge(experiment)[0], "pointwise")


CAVEAT = (
    "**Simulator caveat.** Every number here comes from the simulated judge (`{judge}` preset, "
    "unchanged). Its pairwise vs pointwise resolution is an *assumption*, not a measurement: a pairwise "
    "verdict sees the two latent qualities' difference with noise 0.15 on the latent logit scale and a "
    "comparative reference point, while a pointwise score is sigmoid(quality) + N(0, 0.02), which "
    "saturates at the top of the scale. How much tournaments gain over pointwise scoring scales with "
    "that assumption; a real judge's resolution would have to be measured (results/fidelity.md) "
    "before any conclusion here transfers."
)
FITTED_CAVEAT = (
    "**Judge.** The fitted judge `{judge}` (`conf/judge/{judge}.yaml`, kind `ordinal`): its score grid "
    "and ceiling, pointwise and pairwise noise, position bias and ties are *measured* on recorded "
    "judgments of the real judge (`results/judges/`, docs/calibration.md). Still assumed: how the "
    "trainer's responses sit on that judge's scale (`judge.quality_map=start`: the SFT start's samples "
    "get the recorded responses' latent mean and spread; the run tags `judge_quality_loc`/`_scale` "
    "hold the numbers), normal noise independent between the two formats, no length bias. The "
    "judge-free arms (`oracle`, `rank_oracle`) are not rerun per judge: their policies do not depend on "
    "the judge (tests/trainers/local/test_judge_map.py), see the default sweep's report."
)
PERSISTENT_CAVEAT = (
    "**Judge.** The fitted judge `{judge}` (`conf/judge/{judge}.yaml`, kind `ordinal`, issue 39): "
    "besides the grid, ceiling, noise, position bias and ties of the other fits, its view of a response "
    "carries a *persistent* error drawn once per response (the same in every comparison, both orders "
    "and both formats: more comparisons cannot average it away) and `surface_beta` × the response's "
    "standardized surface feature, both *measured* on LLMBar (both-order-wrong and cross-format error "
    "rates, the length coefficient; `results/judges/persistence.md`). Still assumed: how the trainer's "
    "responses sit on the judge's scale (`judge.quality_map=start`), and on task=hackable that one SD of "
    "the filler feature counts as one SD of log length. The judge-free arms are not rerun per judge."
)
# arms that ask the judge to rank more than two at once (issue 41): their judge is the simulator's
# listwise model, which no recorded listwise judgment calibrates
LISTWISE_ARMS = {"listwise", "kwise_knockout"}
LISTWISE_NOTE = (
    " **Listwise arms.** `listwise` (RULER: one ranking call per group) and `kwise_knockout` "
    "(Tournament-GRPO: k-wise knockout, k = 4) are judged by the simulator's listwise model "
    "(Plackett–Luce on the judge's view of each response, with per-call noise and a primacy bias "
    "that grow with the list's length; docs/judges.md): an assumption, calibrated by no recorded "
    "listwise judgment. Their rows say what a judge whose ranking noise grows that way would give."
)
PRIMARY_WHY = (
    f"Primary metric: final `{PRIMARY}` — the mean true quality of 16 samples at T = 1 per prompt on "
    "all 32 prompts (a fixed generator, the same draws for every arm): the policy's expected quality, "
    "which is what RL optimizes. Greedy `eval_quality` (the policy's mode) is shown beside it; with the "
    "perfect-teacher warm start the SFT policy's greedy answers are already the best tokens, so greedy "
    "quality can only fall or stay, and differences there mostly show arms that drifted."
)


def fmt(m: float, lo: float = math.nan, hi: float = math.nan, signed: bool = False, nd: int = 3) -> str:
    if m is None or (isinstance(m, float) and math.isnan(m)):
        return ""
    s = f"{m:+.{nd}f}" if signed else f"{m:.{nd}f}"
    return s if math.isnan(lo) else f"{s} [{lo:.{nd}f}, {hi:.{nd}f}]"


def fmt_p(p: float) -> str:
    return "" if p is None or math.isnan(p) else f"{p:.2g}"


def paired_cells(r, q: str) -> list[str]:
    """An arm_stats row's ``q`` [CI], its paired difference vs the baseline [CI] and p."""
    return [
        fmt(r[q], r[f"{q}_lo"], r[f"{q}_hi"]),
        fmt(r[f"d_{q}"], r[f"d_{q}_lo"], r[f"d_{q}_hi"], signed=True),
        fmt_p(r[f"p_{q}"]),
    ]


def run_info(experiment: str, uri: str | None, where: dict | None = None) -> dict:
    """Seeds, steps, commits and sweep of an experiment's latest sweep."""
    runs = load_runs(experiment, uri=uri)
    if where:
        runs = select_runs(runs, where)
    client = open_client(tracking_uri(uri), must_exist=True)
    steps = sorted({client.get_run(r).data.params.get("steps") for r in runs["run_id"]})
    return {
        "n_runs": len(runs),
        "seeds": sorted({int(s) for s in runs["seed"]}),
        "arms": sorted(set(runs[BY])),
        "steps": [int(s) for s in steps if s is not None],
        "commits": sorted(set(runs.get("git_commit", pd.Series(dtype=str)).dropna())),
        "command": sweep_command(experiment, runs),
        "sweep": runs.attrs.get("sweep"),
    }


def complete_seeds(
    experiment: str, uri: str | None, where: dict | None = None
) -> tuple[list[str], list[str]]:
    """(seeds every arm finished, all seeds seen): a sweep stopped early leaves some arms short."""
    runs = select_runs(load_runs(experiment, uri=uri), where)
    per_arm = [set(g["seed"].astype(str)) for _, g in runs.groupby(BY)]
    common = set.intersection(*per_arm) if per_arm else set()
    return sorted(common, key=int), sorted(set.union(*per_arm) if per_arm else set(), key=int)


def sweep_command(experiment: str, runs: pd.DataFrame) -> str:
    """The sweep command that reproduces ``runs``: ``-m experiment=NAME`` plus every override whose
    values across the runs differ from the experiment file's own sweep (e.g. a reward subset).
    Where the runs were stored (``tracking.uri``) is not part of what reproduces them: it is left
    out, so a page does not show the regenerating machine's store path."""
    import yaml

    design = split_judge(experiment)[0]
    conf = Path(__file__).resolve().parents[1] / "conf" / "experiment" / f"{design}.yaml"
    params = yaml.safe_load(conf.read_text())["hydra"]["sweeper"]["params"] if conf.exists() else {}
    own = {k: [x.strip() for x in str(v).split(",")] for k, v in params.items()}
    seen: dict[str, list[str]] = {}
    for o in runs.get("overrides", pd.Series(dtype=str)).dropna():
        for tok in str(o).split():
            k, _, v = tok.partition("=")
            if k in ("progress", "experiment", "tracking.uri") or k.startswith("hydra"):
                continue
            seen.setdefault(k, [])
            if v not in seen[k]:
                seen[k].append(v)
    extra = []
    for k, vals in seen.items():
        ref = own.get(k)
        if ref is None or set(vals) != set(ref):
            order = [v for v in (ref or []) if v in vals] + [v for v in vals if v not in (ref or [])]
            extra.append(f"{k}={','.join(order)}")
    return " ".join([f"arenabench-train -m experiment={design}", *extra])


def _where(experiment: str, uri: str | None, where: dict | None) -> dict | None:
    """``where``, restricted to the seeds every arm finished (pair only over those)."""
    common, seen = complete_seeds(experiment, uri, where)
    return {**(where or {}), "seed": common} if common != seen else where


def stats_tables(experiment: str, uri: str | None, where: dict | None = None) -> dict[str, pd.DataFrame]:
    where = _where(experiment, uri, where)
    kw = {"uri": uri, "by": BY, "where": where}
    t = {
        "primary": arm_stats(experiment, PRIMARY, baseline=baseline(experiment), **kw),
        "greedy": arm_stats(experiment, "eval_quality", baseline=baseline(experiment), **kw),
        "adv": arm_stats(experiment, "adv_oracle_pearson", **kw),
    }
    # a judge that re-scores every response the same way (σ_noise = 0: the fitted temperature-0
    # judges) leaves SNR undefined at every step: nothing logged, counted as snr_nan_steps
    if "snr" in logged(experiment, uri, where):
        t["snr"] = arm_stats(experiment, "snr", **kw)
    else:
        t["snr"] = pd.DataFrame({"arm": t["primary"]["arm"], "auc": math.nan})
    if verifiable(experiment, uri, where):  # the verifier's objective beside the judged one
        for name in VERIFIER_METRICS:
            t[name] = arm_stats(experiment, name, baseline=baseline(experiment), **kw)
    return t


def logged(experiment: str, uri: str | None, where: dict | None = None) -> set[str]:
    """The metrics the experiment's runs logged."""
    return set(select_runs(load_runs(experiment, uri=uri), where).attrs["metric_keys"].values())


def verifiable(experiment: str, uri: str | None, where: dict | None = None) -> bool:
    return "eval_pass_rate" in logged(experiment, uri, where)


def run_rows(experiment: str, uri: str | None, where: dict | None = None) -> pd.DataFrame:
    """One row per run (seed, arm, final, AUC, judge calls, checkpoint hash, ...): ``_runs.csv``."""
    have = logged(experiment, uri, where)
    metrics = tuple(m for m in RUN_METRICS if m in have)
    metrics += VERIFIER_METRICS if verifiable(experiment, uri, where) else ()
    where = _where(experiment, uri, where)
    return runs_table(experiment, metrics, uri=uri, by=BY, where=where, pooled=POOLED, params=RUN_PARAMS)


def _steps_note(runs: pd.DataFrame | None, arm: str, metric: str, steps: int) -> str:
    """`` (k/m)``: of the arm's m step values of an every-step metric, the k a mean is taken over."""
    if runs is None:
        return ""
    r = runs[runs["arm"] == arm]
    if f"{metric}_points" not in r:  # never logged (every step NaN)
        return f" (0/{steps * len(r)})"
    return f" ({int(r[f'{metric}_points'].sum())}/{steps * len(r)})"


def _has_tokens(table: pd.DataFrame) -> bool:
    cols = ("judge_prompt_tokens_total", "judge_completion_tokens_total")
    return all(c in table for c in cols) and bool((table[cols[0]].fillna(0) > 0).any())


def tokens_cell(r, steps: int) -> str:
    """Judge tokens per step, prefill + decode (— where the judge counts none)."""
    p, d = r.get("judge_prompt_tokens_total", math.nan), r.get("judge_completion_tokens_total", math.nan)
    if p is None or d is None or math.isnan(p) or math.isnan(d):
        return "—"
    if p + d == 0 and r.get("judge_calls", 0) > 0:  # asked the judge, counted nothing (pointwise)
        return "—"
    return f"{(p + d) / steps:,.0f}"


def main_table(
    t: dict[str, pd.DataFrame], steps: int, base: str = "pointwise", runs: pd.DataFrame | None = None
) -> list[str]:
    q, g = t["primary"], t["greedy"].set_index("arm")
    adv, snr = t["adv"].set_index("arm"), t["snr"].set_index("arm")
    ties = runs.groupby("arm")["tie_rate"].mean() if runs is not None else pd.Series(dtype=float)
    head = (
        f"| arm | n | judge calls / step | judge tokens / step | final sampled quality [95% CI] "
        f"| Δ final vs {base} [95% CI] "
        f"| p | AUC [95% CI] | Δ AUC vs {base} [95% CI] | p | final greedy quality [95% CI] "
        f"| Δ greedy vs {base} [95% CI] | p | mean adv–oracle r [95% CI] | mean SNR (steps) | tie rate |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for _, r in q.iterrows():
        a = r["arm"]
        gr, ar, sr = g.loc[a], adv.loc[a], snr.loc[a]
        tie = ties.get(a, math.nan)
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{a}`",
                    str(int(r["n"])),
                    f"{r['judge_calls'] / steps:.1f}",
                    tokens_cell(r, steps),
                    *paired_cells(r, "final"),
                    *paired_cells(r, "auc"),
                    *paired_cells(gr, "final"),
                    fmt(ar["auc"], ar["auc_lo"], ar["auc_hi"], nd=2),
                    fmt(sr["auc"], nd=2) + _steps_note(runs, a, "snr", steps),
                    "—" if math.isnan(tie) else f"{tie:.3f}",
                ]
            )
            + " |"
        )
    return lines + [""]


def objectives_table(t: dict[str, pd.DataFrame], base: str, design: str = "reasoning_arena") -> list[str]:
    """Reasoning Arena's second objective: the verifier's pass rate per arm, paired by seed."""
    rows = [
        "## Both objectives: verifier pass rate beside judged quality",
        "",
        OBJECTIVES_NOTES.get(
            design,
            "The rlvr task has two objectives: the preference part (judged; the quality above) and the "
            "verifiable answer (exact match of the last token). *Pass rate* = share of the 16 × 32 sampled "
            "eval responses (T = 1, the same draws as the sampled quality) that the verifier accepts; "
            "*greedy pass rate* = share of the 32 greedy answers; *answer elsewhere* = share of the sampled "
            "responses' non-final positions holding the answer token (0.0625 for a uniform token).",
        ),
        "",
        f"| arm | n | final pass rate [95% CI] | Δ vs {base} [95% CI] | p | AUC pass rate [95% CI] "
        f"| Δ AUC vs {base} [95% CI] | p | final greedy pass rate [95% CI] | Δ vs {base} [95% CI] | p "
        "| final answer elsewhere [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    gp, ae = t["eval_greedy_pass_rate"].set_index("arm"), t["eval_answer_elsewhere"].set_index("arm")
    for _, r in t["eval_pass_rate"].iterrows():
        a = r["arm"]
        g, e = gp.loc[a], ae.loc[a]
        rows.append(
            "| "
            + " | ".join(
                [
                    f"`{a}`",
                    str(int(r["n"])),
                    *paired_cells(r, "final"),
                    *paired_cells(r, "auc"),
                    *paired_cells(g, "final"),
                    fmt(e["final"], e["final_lo"], e["final_hi"]),
                ]
            )  # fmt: skip
            + " |"
        )
    return rows + [""]


def teacher_spread(runs: pd.DataFrame, base: str = "pointwise") -> list[str]:
    """Per teacher draw (the SFT seed, ``init.seed``; = the RL seed where it varies with it), each
    arm's final sampled quality minus the base arm's, and the spread of that difference across draws."""
    col = f"{PRIMARY}_final"
    draws = sorted(runs["init_seed"].dropna().unique(), key=int)
    if len(draws) < 2:
        return [
            f"**One teacher draw** (`init.seed` = {', '.join(draws) or '?'}): the spread across teacher "
            "draws is not measured by this sweep.",
            "",
        ]
    wide = runs.pivot_table(index=["init_seed", "seed"], columns="arm", values=col, aggfunc="first")
    arms = [a for a in wide.columns if a != base]
    lines = [
        "## Spread across teacher draws",
        "",
        f"Δ final sampled quality vs `{base}` per teacher draw (`init.seed`: its logit noise, SFT init "
        "and demonstrations), with the mean, SD and range across draws.",
        "",
        "| teacher draw | RL seed | " + " | ".join(f"`{a}`" for a in arms) + " |",
        "|---|---|" + "---|" * len(arms),
    ]
    d = wide[arms].sub(wide[base], axis=0)
    for (draw, seed), row in d.sort_index(key=lambda i: i.astype(int)).iterrows():
        lines.append(f"| {draw} | {seed} | " + " | ".join(f"{v:+.3f}" for v in row) + " |")
    for name, f in (("mean", "mean"), ("SD", "std"), ("min", "min"), ("max", "max")):
        spec = ".3f" if f == "std" else "+.3f"
        lines.append(f"| {name} | | " + " | ".join(format(getattr(d[a], f)(), spec) for a in arms) + " |")
    return lines + [""]


def runs_listing(runs: pd.DataFrame, steps: int) -> list[str]:
    """Every run, one row: what a rerun is compared against (``arenabench compare --against``)."""
    cols = [f"{PRIMARY}_final", f"{PRIMARY}_auc"]
    cols += [c for c in ("eval_pass_rate_final",) if c in runs]
    head = "| arm | seed | teacher draw | init sha256 | judge calls / step | " + " | ".join(cols) + " |"
    lines = [
        "## Runs",
        "",
        "<details><summary>One row per run (also in the `_runs.csv` beside this file)</summary>",
        "",
        head,
        "|" + "---|" * (head.count(" | ") + 1),
    ]
    for _, r in runs.iterrows():
        h = r["init_sha256"] if isinstance(r["init_sha256"], str) else "(untagged)"
        lines.append(
            f"| {r['arm']} | {r['seed']} | {r.get('init_seed', '')} | `{h[:16]}` | "
            f"{r['judge_calls'] / steps:.1f} | " + " | ".join(f"{r[c]:.6f}" for c in cols) + " |"
        )
    return lines + ["", "</details>", ""]


def starts_line(runs: pd.DataFrame) -> list[str]:
    """Which SFT checkpoint(s) the runs start from (content sha256, ``init_sha256`` tag)."""
    hashes = runs["init_sha256"].dropna()
    if hashes.empty:
        return ["- Start checkpoint: the runs carry no `init_sha256` tag (logged before issue 26).", ""]
    counts = hashes.value_counts()
    listed = ", ".join(f"`{h[:16]}` ({n} runs)" for h, n in counts.items())
    missing = len(runs) - len(hashes)
    return [
        f"- Start checkpoint(s), content sha256 (`init_sha256` tag; `arenabench sft verify` rebuilds "
        f"them): {listed}" + (f"; {missing} runs untagged" if missing else "") + ".",
        "",
    ]


def legend(steps: int, base: str = "pointwise") -> list[str]:
    return [
        "Columns: *final* = the value at the last step (step "
        f"{steps - 1}); *AUC* = the area under the eval curve (logged every `eval_every` steps) divided by "
        f"its step span, i.e. the curve's time-average; *Δ … vs {base}* = mean paired difference arm − "
        f"{base} over seeds (same seed = same SFT checkpoint and prompt order) with its 95% t CI and the "
        "two-sided paired t-test p-value (few pairs: read p as a screening number, not a verdict; "
        "no multiple-comparison correction); *judge calls / step* = final cumulative judge calls / steps "
        "(the oracle controls ask none); *judge tokens / step* = prefill + decode tokens per step that "
        "a real pairwise judge would be sent for these texts (the simulated and the fitted judges count "
        "comparisons under `tiny-bpe` with the rubric's prompt, docs/tokens.md; — where nothing is "
        "counted: pointwise requests, which the LLM backends have no prompt for); "
        "*mean adv–oracle r* = time-average over steps of the per-group "
        "Pearson r between the arm's advantages and standardize(true quality) (steps with no usable group "
        "log 0); *mean SNR* = time-average of σ_group/σ_noise of pointwise scores of the arm's own samples "
        "(a property of the policy, logged in every arm) over the step values that are finite — *(steps)* "
        "= how many of the arm's step values that is (σ_noise = 0 on an integer judge makes SNR NaN; "
        "such steps are counted as `snr_nan_steps`, not averaged); *tie rate* = ties per answered "
        "comparison over the whole run (Σ ties / Σ comparisons), mean over seeds (— : the arm compares "
        "nothing). Late in training collapsed groups hold identical texts, which every judge ties.",
        "",
    ]


def header(experiment: str, info: dict, out: str, extra_cmd: str = "") -> list[str]:
    commits = ", ".join(f"`{c[:12]}`" for c in info["commits"]) or "(untagged)"
    design, fitted = split_judge(experiment)
    title = TITLES.get(design, design) + (f" — under the fitted judge `{fitted}`" if fitted else "")
    caveat = (
        (PERSISTENT_CAVEAT if fitted in PERSISTENT else FITTED_CAVEAT).format(judge=fitted)
        if fitted
        else CAVEAT.format(judge=JUDGES.get(experiment, "calibrated"))
        + JUDGE_NOTES.get(JUDGES.get(experiment, ""), "")
    )
    return [
        f"# {title}",
        "",
        f"- Runs: {info['n_runs']} (sweep `{info['sweep']}`), arms: {', '.join(info['arms'])}; "
        f"seeds {', '.join(map(str, info['seeds']))}; steps {', '.join(map(str, info['steps']))}.",
        f"- Produced by commit {commits} (the runs' `git_commit` tag).",
        f"- Command: `{info['command']}{extra_cmd}` then "
        f"`python experiments/table2_report.py --out {out} --experiments {experiment}`; design and "
        f"budget: `conf/experiment/{design}.yaml`.",
        "",
        caveat + (LISTWISE_NOTE if set(info["arms"]) & LISTWISE_ARMS else ""),
        "",
        PRIMARY_WHY,
        "",
    ]


def judge_of(experiment: str) -> str:
    """The judge an experiment's runs were judged by: the fitted judge it was rerun under, else the
    design's simulated preset (:data:`JUDGES`, default ``calibrated``)."""
    design, fitted = split_judge(experiment)
    return fitted or JUDGES.get(design, "calibrated")


BAND = "band: 95% CI of the mean over seeds"
CI = "mean, 95% CI over seeds"
SNR_UNDEFINED = (
    "SNR = σ_group / σ_noise is undefined under this judge at every step: it answers a re-asked "
    "question with the same score (temperature 0, rejudge_share = 0), so σ_noise = 0. The steps are "
    "counted in snr_nan_steps, not averaged; the collapse figure shows σ_group alone."
)


def figures(experiment: str, t: dict, steps: int, uri, out: Path, where=None, tag: str = "") -> list[str]:
    name = f"{experiment}{tag}"
    judge = judge_of(experiment)
    base = t["primary"].attrs.get("baseline", baseline(experiment))
    paired_difference_figure(
        t["primary"], path=out / f"{name}_paired_diff.png",
        title=figure_title(name, judge, f"sampled quality, paired Δ vs {base} by seed (final and AUC)"),
    )  # fmt: skip
    stats_frontier_figure(
        t["primary"], steps=steps, path=out / f"{name}_frontier.png",
        title=figure_title(name, judge, f"final sampled quality vs judge calls per step\n({CI})"),
    )  # fmt: skip
    tokens = _has_tokens(t["primary"])
    if tokens:  # the judge's bill in tokens (prefill + decode, docs/tokens.md) beside its calls
        p = t["primary"]
        counted = p[(p["judge_prompt_tokens_total"].fillna(0) > 0) | (p["judge_calls"] == 0)]
        stats_frontier_figure(
            counted, steps=steps, cost="judge_tokens", path=out / f"{name}_frontier_tokens.png",
            title=figure_title(name, judge, "final sampled quality vs judge tokens (prefill + decode) per "
                               "step\n(arms whose requests count no tokens, e.g. pointwise, left out)"),
        )  # fmt: skip
    c = metric_curves(experiment, PRIMARY, uri=uri, by=BY, where=where)
    curves_figure(
        c, PRIMARY, path=out / f"{name}_curves.png",
        title=figure_title(name, judge, f"sampled quality over training, mean over seeds\n({BAND})"),
    )  # fmt: skip
    links = [
        f"![paired differences]({name}_paired_diff.png) ![frontier]({name}_frontier.png) "
        + (f"![frontier in tokens]({name}_frontier_tokens.png) " if tokens else "")
        + f"![curves]({name}_curves.png)"
    ]
    if "eval_pass_rate" in t:  # Reasoning Arena: the verifier's own objective over training
        c = metric_curves(experiment, "eval_pass_rate", uri=uri, by=BY, where=where)
        curves_figure(
            c, "eval_pass_rate", path=out / f"{name}_pass_rate.png",
            title=figure_title(name, judge, f"verifier pass rate over training, mean over seeds\n({BAND})"),
        )  # fmt: skip
        links.append(f"![pass rate]({name}_pass_rate.png)")
    return [" ".join(links), ""]


DYNAMICS = ("snr", "entropy", "adv_oracle_pearson", "distinct_share")


def dynamics_figures(experiment: str, uri, out: Path) -> list[str]:
    judge = judge_of(experiment)
    sg = metric_curves(experiment, "sigma_group", uri=uri, by=BY, smooth=10)
    sn = metric_curves(experiment, "sigma_noise", uri=uri, by=BY, smooth=10)
    collapse_figure(
        sg,
        sn,
        title=figure_title(experiment, judge, "σ_group (solid) vs σ_noise (dashed), mean over seeds, "
                           "10-step rolling mean"),
        path=out / f"{experiment}_collapse.png",
    )  # fmt: skip
    names = []
    have = logged(experiment, uri)
    for m in DYNAMICS:
        path = out / f"{experiment}_{m}.png"
        names.append(m)
        if m not in have:  # SNR under a judge with no re-scoring noise: undefined at every step
            note_figure(figure_title(experiment, judge, metric_label(m)), SNR_UNDEFINED if m == "snr" else
                        f"{m} was not logged by these runs.", path=path)  # fmt: skip
            continue
        c = metric_curves(experiment, m, uri=uri, by=BY, smooth=10)
        what = f"{metric_label(m)}, mean over seeds (10-step rolling mean)\n({BAND})"
        curves_figure(c, m, title=figure_title(experiment, judge, what), path=path)
    q = []
    for m, c in (("sigma_group", sg), ("sigma_noise", sn)):
        for arm, d in c.sort_values("step").groupby("group"):
            k = max(len(d) // 4, 1)
            q.append((m, arm, d["raw_mean"].iloc[:k].mean(), d["raw_mean"].iloc[-k:].mean()))
    lines = ["### σ_group and σ_noise, first vs last quarter of the steps (mean over steps and seeds)", ""]
    lines += ["| metric | arm | first quarter | last quarter |", "|---|---|---|---|"]
    lines += [f"| {m} | `{a}` | {f:.4f} | {la:.4f} |" for m, a, f, la in q]
    lines += [
        "",
        f"![collapse]({experiment}_collapse.png) " + " ".join(f"![{m}]({experiment}_{m}.png)" for m in names),
        "",
    ]
    return lines


ROUTING_METRICS = ("routed_share", "all_wrong_share", "all_correct_share")


def routing_section(experiment: str, uri, out: Path) -> list[str]:
    """Per arm, the share of verifier groups routed to the tournament and of all-wrong / all-correct
    groups (each step's K groups; mean over steps and seeds, first and last quarter of the steps),
    and the curves of the routed share and of the sampled pass rate over steps."""
    rows = []
    for m in ROUTING_METRICS:
        c = metric_curves(experiment, m, uri=uri, by=BY)
        for arm, d in c.sort_values("step").groupby("group"):
            k = max(len(d) // 4, 1)
            rows.append((m, arm, d["mean"].mean(), d["mean"].iloc[:k].mean(), d["mean"].iloc[-k:].mean()))
    routed = metric_curves(experiment, "routed_share", uri=uri, by=BY, smooth=10)
    curves_figure(
        routed, "routed_share", title=f"{experiment}: routed share (10-step mean)",
        path=out / f"{experiment}_routed_share.png",
    )  # fmt: skip
    passed = metric_curves(experiment, "eval_pass_rate", uri=uri, by=BY)
    curves_figure(
        passed, "eval_pass_rate", title=f"{experiment}: sampled pass rate, mean ± std over seeds",
        path=out / f"{experiment}_pass_rate.png",
    )  # fmt: skip
    lines = [
        "## Routing: the share of groups sent to the tournament",
        "",
        "Per step, of the K = 8 verifier groups: *routed* = sent to the tournament; *all wrong* / *all "
        "right* = every verifier reward 0 / 1 (what routing can act on; the `rlvr` arm routes nothing). "
        "Mean over steps and seeds; first and last quarter of the steps.",
        "",
        "| metric | arm | all steps | first quarter | last quarter |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {m} | `{a}` | {al:.3f} | {f:.3f} | {la:.3f} |" for m, a, al, f, la in rows]
    lines += [
        "",
        f"![routed share]({experiment}_routed_share.png) ![pass rate]({experiment}_pass_rate.png)",
        "",
    ]
    return lines


def report_experiment(experiment: str, uri, out: Path, out_arg: str) -> str:
    info = run_info(experiment, uri)
    steps = info["steps"][0] if len(info["steps"]) == 1 else max(info["steps"])
    parts = header(experiment, info, out_arg)
    if split_judge(experiment)[0] == "group_size":
        return report_group_size(experiment, info, steps, uri, out, parts)
    common, seen = complete_seeds(experiment, uri)
    if common != seen:
        parts += [
            f"**Incomplete sweep**: stopped before every arm finished every seed; paired statistics use "
            f"seeds {', '.join(common)} only (seen: {', '.join(seen)}).",
            "",
        ]
    t = stats_tables(experiment, uri)
    pd.concat({k: v for k, v in t.items()}, names=["table"]).to_csv(out / f"{experiment}_stats.csv")
    runs = run_rows(experiment, uri)
    runs.to_csv(out / f"{experiment}_runs.csv", index=False)
    base = baseline(experiment)
    parts = parts[:5] + starts_line(runs) + parts[5:]
    parts += [
        f"## Arms vs {base}, paired by seed",
        "",
        *main_table(t, steps, base, runs),
        *legend(steps, base),
    ]
    if "eval_pass_rate" in t:
        parts += objectives_table(t, base, split_judge(experiment)[0])
    if "routed_share" in logged(experiment, uri):  # adaptive arms' routing (issue 42)
        parts += routing_section(experiment, uri, out)
    if split_judge(experiment)[0] == "table2_imperfect":
        parts += teacher_spread(runs, base)
    parts += figures(experiment, t, steps, uri, out)
    parts += ["## Dynamics", "", *dynamics_figures(experiment, uri, out)]
    parts += runs_listing(runs, steps)
    return "\n".join(parts)


N_FROM_TABLE2 = 8


def _restrict(table: pd.DataFrame, arms: set) -> pd.DataFrame:
    out = table[table["arm"].isin(arms)].reset_index(drop=True)
    out.attrs.update(table.attrs)
    return out


def report_group_size(experiment: str, info: dict, steps: int, uri, out: Path, parts: list[str]) -> str:
    fitted = split_judge(experiment)[1]
    table2 = f"table2_{fitted}" if fitted else "table2"  # N = 8 under the same judge
    runs = load_runs(experiment, uri=uri)
    ns = sorted(
        {int(o.split("=")[1]) for s in runs["overrides"] for o in s.split() if o.startswith("group_size=")}
    )
    tables, frames, per_run = {}, {}, []
    parts += ["## Arms vs pointwise at each group size N, paired by seed", ""]
    sources = {n: (experiment, {"group_size": str(n)}) for n in ns}
    if N_FROM_TABLE2 not in ns:
        try:  # the group_size sweep leaves N = 8 to table2: the same jobs (conf/experiment/group_size.yaml)
            load_runs(table2, uri=uri)
            sources[N_FROM_TABLE2] = (table2, None)
        except ValueError:
            pass
    arms = set(runs[BY])
    for n in sorted(sources):
        src, where = sources[n]
        common, seen = complete_seeds(src, uri, where)
        if len(common) < 2:
            parts += [
                f"### N = {n}",
                "",
                f"Not enough complete seeds (every arm: {common}; seen {seen}).",
                "",
            ]
            continue
        t = stats_tables(src, uri, where=where)
        if src == table2:  # only the arms the group_size sweep has
            t = {k: _restrict(v, arms) for k, v in t.items()}
            info8 = run_info(table2, uri)
            parts += [
                f"### N = {n} (from the {table2} sweep `{info8['sweep']}`, commit(s) "
                + ", ".join(f"`{c[:12]}`" for c in info8["commits"])
                + "; the same jobs: configs differ only in the experiment name)",
                "",
            ]
        else:
            parts += [f"### N = {n}", ""]
        if common != seen:
            parts += [f"Incomplete: the sweep stopped early; paired over seeds {', '.join(common)} only.", ""]
        tables[n], frames[f"N={n}"] = t["primary"], pd.concat(dict(t), names=["table"])
        r = run_rows(src, uri, where)
        r = r[r["arm"].isin(arms)].assign(group_size=n)
        per_run.append(r)
        parts += main_table(t, steps, runs=r)
    pd.concat(frames, names=["group_size"]).to_csv(out / f"{experiment}_stats.csv")
    runs = pd.concat(per_run, ignore_index=True) if per_run else pd.DataFrame()
    runs.to_csv(out / f"{experiment}_runs.csv", index=False)
    if len(runs):
        parts = parts[:5] + starts_line(runs) + parts[5:]
    parts += legend(steps)
    e = experiment
    judge = judge_of(e)
    xlabel = "group size N (samples per prompt)"
    sweep_figure(tables, xlabel, path=out / f"{e}_final.png",
                 title=figure_title(e, judge, f"final sampled quality by N\n({CI})"))  # fmt: skip
    sweep_figure(tables, xlabel, quantity="auc", path=out / f"{e}_auc.png",
                 title=figure_title(e, judge, f"AUC of sampled quality by N\n({CI})"))  # fmt: skip
    parts += [f"![final by N]({e}_final.png) ![AUC by N]({e}_auc.png)", ""]
    if len(runs):
        parts += runs_listing(runs, steps)
    return "\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/train")
    ap.add_argument(
        "--uri", default=None, help="tracking URI (default: $MLFLOW_TRACKING_URI or results/mlflow.db)"
    )
    ap.add_argument("--experiments", nargs="*", default=list(EXPERIMENTS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for experiment in args.experiments:
        try:
            text = report_experiment(experiment, args.uri, out, args.out)
        except ValueError as exc:
            if "unknown experiment" in str(exc):
                print(f"skip {experiment}: not in the store ({exc})")
                continue
            raise
        (out / f"{experiment}.md").write_text(text)
        print(text)


if __name__ == "__main__":
    main()

"""``arenabench`` command line: ``list``, ``fidelity``, ``compare``, ``judge-stats``, ``calibrate``,
``sft`` (training: ``arenabench-train``)."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import textwrap
from pathlib import Path

# Only the standard library at import: ``arenabench --help`` answers without numpy, the engine or
# the constructors; each command imports what it needs.
CONF = Path(__file__).resolve().parents[1] / "conf"
FIDELITY_FORMATS = ("table", "json", "csv", "markdown")  # arenabench.fidelity.FORMATS (a test checks)
ORDER_POLICIES = ("both", "random", "balanced", "fixed")  # arenabench.order.ORDERS (a test checks)
PRIMARY_METRIC = "eval_sampled_quality"  # the local trainer's primary metric (results/README.md)
WIDTH = 100


def first_sentence(text: str | None) -> str:
    """The first sentence of a docstring or comment block, whole (joined across lines; RST
    markup dropped): up to the first '.', '!' or '?' followed by a space or the end of the
    paragraph, not the dot of an abbreviation ("e.g.", "i.e.", "vs.", "cf.", "Fig.", "Eq.") and
    not one before a number ("Fig. 4a")."""
    para = re.split(r"\n\s*\n", (text or "").strip(), maxsplit=1)[0]
    flat = " ".join(para.split()).replace("``", "")
    m = re.search(r"(?<!e\.g)(?<!i\.e)(?<!\bvs)(?<!\bcf)(?<!\bFig)(?<!\bEq)[.!?](?=\s+\D|$)", flat)
    return flat[: m.end()] if m else flat


def _wrapped(text: str, indent: int) -> str:
    lines = textwrap.wrap(text, WIDTH - indent) or [""]
    return ("\n" + " " * indent).join(lines)


def _comment_block(path: Path) -> str:
    """The leading ``#`` comment of a conf file (hydra's ``@package`` line skipped)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if "@package" not in line:
            lines.append(line.lstrip("#").strip())
    return "\n".join(lines)


def cmd_list(args) -> int:
    import dataclasses

    from arenabench import rewards
    from arenabench.judges.simulated import PRESET_NOTES, PRESETS

    print("reward constructors (rewards.get(name, **params); fidelity --constructors name:key=value):")
    for name in rewards.names():
        cls = rewards.REGISTRY.lookup(name)
        params = ", ".join(
            f"{f.name}={f.default_factory() if f.default is dataclasses.MISSING else f.default!r}"
            for f in dataclasses.fields(cls)
            if f.init and f.name not in cls.unused_params
        )
        print(f"  {name:<22}{_wrapped(first_sentence(cls.__doc__), 24)}")
        print(f"  {'':<22}{_wrapped('params: ' + params, 24)}")
    print("\njudge presets (simulated judge: judge.preset=NAME, fidelity --judge NAME):")
    base = PRESETS["calibrated"]
    for name in sorted(PRESETS):
        diff = {k: v for k, v in PRESETS[name].items() if base.get(k) != v}
        extra = "" if name == "calibrated" else f" ({', '.join(f'{k}={v}' for k, v in diff.items())})"
        values = ", ".join(f"{k}={v}" for k, v in base.items()) if name == "calibrated" else ""
        print(f"  {name:<15}{_wrapped(PRESET_NOTES.get(name, '') + extra, 17)}")
        if values:
            print(f"  {'':<15}{_wrapped(values, 17)}")
    from arenabench import judges

    fitted = judges.fitted()
    if fitted:
        print("\nfitted judges (conf/judge/NAME.yaml, kind ordinal; docs/calibration.md):")
        for name in fitted:
            head = _comment_block(CONF / "judge" / f"{name}.yaml").splitlines()[0]
            print(f"  {name:<22}{_wrapped(head.split('): ', 1)[-1], 24)}")
    if CONF.is_dir():
        print(f"\nconf variants (arenabench-train GROUP=NAME; files in {CONF}):")
        same = {"reward": set(rewards.names()), "judge": set(PRESETS) | set(fitted)}  # listed above by name
        for group in sorted(p for p in CONF.iterdir() if p.is_dir() and p.name != "verl"):
            files = sorted(group.glob("*.yaml"))
            plain = [f.stem for f in files if f.stem in same.get(group.name, ())]
            print(f"  {group.name}:")
            if plain:
                what = "constructor" if group.name == "reward" else "preset"
                print(f"    {_wrapped(f'each {what} above, its defaults: ' + ', '.join(plain), 4)}")
            for f in files:
                if f.stem not in plain:
                    print(f"    {f.stem:<24}{_wrapped(first_sentence(_comment_block(f)), 28)}")
    return 0


def _constructor_list(text: str | None) -> list[str] | None:
    from arenabench import rewards

    if not text:
        return None
    names = [s.strip() for s in text.split(",") if s.strip()]
    for n in names:
        rewards.from_spec(n)  # one clear error for a bad name or parameter
    return names


def _emit(text: str, output: str | None) -> None:
    """Write ``text`` to ``output`` (creating its folder) or print it."""
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text + "\n")
    else:
        print(text)


def cmd_fidelity(args) -> int:
    from arenabench.fidelity import format_rows, plot_frontier, run_fidelity

    rows = run_fidelity(
        constructors=_constructor_list(args.constructors),
        group_size=args.group_size,
        n_groups=args.groups,
        judge=args.judge,
        seed=args.seed,
        order=args.order,
        diagnostics=args.diagnostics,
    )
    text = format_rows(rows, args.format)
    _emit(text, args.output)
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_frontier(
            rows, args.plot, title=f"Fidelity per judge call (judge={args.judge}, N={args.group_size})"
        )
    return 0


def cmd_compare_stats(args) -> int:
    """``compare --stats`` / ``--baseline`` / ``--reach``: per-arm CIs, AUC, reach, paired tests."""
    from arenabench.compare import arm_stats, format_stats, metric_curves

    table = arm_stats(
        args.experiment,
        metric=args.metric,
        uri=args.uri,
        sweep=args.sweep,
        by=args.by,
        baseline=args.baseline,
        reach=args.reach,
        level=args.level,
    )
    if table.attrs.get("sweep"):
        print(f"sweep {table.attrs['sweep']}: {int(table['n'].sum())} finished runs", file=sys.stderr)
    _emit(format_stats(table, args.format), args.output)
    if args.plot:
        metric_curves(
            args.experiment, args.metric, uri=args.uri, sweep=args.sweep, by=args.by, path=args.plot
        )
    return 0


def cmd_compare_against(args) -> int:
    """``compare --against RUNS.csv``: this store's runs vs a committed per-run table, run by run.
    Exit status 1 when any run or quantity differs (as ``diff``)."""
    import pandas as pd

    from arenabench.compare import diff_runs, diff_summary, runs_table

    committed = pd.read_csv(args.against, dtype={"seed": str, "init_sha256": str})
    metrics = [c.removesuffix("_final") for c in committed.columns if c.endswith("_final")]
    if not metrics:
        raise ValueError(f"{args.against}: no <metric>_final column: not a per-run table (*_runs.csv)")
    by = committed["arm_by"].iloc[0] if "arm_by" in committed and len(committed) else args.by
    if "group_size" in committed:
        parts = []
        for n in sorted(committed["group_size"].dropna().unique()):
            try:
                t = runs_table(
                    args.experiment, metrics, args.uri, args.sweep, by, where={"group_size": str(n)}
                )
            except ValueError:  # that N is not in this experiment (group_size takes N = 8 from table2)
                continue
            parts.append(t.assign(group_size=n))
        rerun = pd.concat(parts, ignore_index=True) if parts else committed.iloc[:0]
    else:
        rerun = runs_table(args.experiment, metrics, args.uri, args.sweep, by)
    diff = diff_runs(committed, rerun)
    show = diff if args.all_rows else diff[~diff["same"]]
    text = show.to_csv(index=False) if args.format == "csv" else show.to_string(index=False)
    _emit(text if len(show) else "(no differences)", args.output)
    print(diff_summary(diff), file=sys.stderr)
    return 0 if bool(diff["same"].all()) else 1


def cmd_compare(args) -> int:
    from arenabench.compare import find_store, format_summary, load_runs, metric_curves, summarize

    args.uri = find_store(args.uri)  # after `make demo` alone: the demo's store (find_store's rule)
    if args.against:
        return cmd_compare_against(args)
    if args.stats or args.baseline is not None or args.reach is not None:
        return cmd_compare_stats(args)
    if args.format == "json":
        raise ValueError("--format json needs the statistics view: add --stats (or --baseline / --reach)")
    df = load_runs(args.experiment, uri=args.uri, sweep=args.sweep)
    table = summarize(df, metric=args.metric, by=args.by)
    if df.attrs.get("sweep"):
        print(f"sweep {df.attrs['sweep']}: {len(df)} finished runs", file=sys.stderr)
    text = format_summary(table, args.format)
    _emit(text, args.output)
    if args.plot:
        metric_curves(
            args.experiment, args.metric, uri=args.uri, sweep=args.sweep, by=args.by, path=args.plot
        )
    return 0


def _judge_tables(args):
    """(label, JudgeData) per judge (or per judge and source with ``--by source``) of the files."""
    from arenabench.calibration import judge_data, load_files

    table = load_files(args.files)
    if table.skipped:
        print(
            "skipped rows: " + ", ".join(f"{k}: {v}" for k, v in sorted(table.skipped.items())),
            file=sys.stderr,
        )
    names = table.judges()
    if args.judge:
        if args.judge not in names:
            raise ValueError(f"no judgments of judge {args.judge!r}; judges in the files: {', '.join(names)}")
        names = [args.judge]
    out = []
    for j in names:
        if getattr(args, "by", "judge") == "source":
            for src in sorted({r.source for r in table.rows if r.judge == j}):
                out.append((f"{j} {src}", judge_data(table.select(j, [src]), j, f"{j} {src}")))
        else:
            out.append((j, judge_data(table, j)))
    return table, out


def cmd_judge_stats(args) -> int:
    from arenabench.calibration.stats import format_stats, stats_rows

    _, tables = _judge_tables(args)
    _emit(format_stats(stats_rows(tables, n_boot=args.boot), args.format), args.output)
    return 0


def cmd_calibrate(args) -> int:
    from arenabench.calibration import judge_data
    from arenabench.calibration.fit import (
        N_SIM,
        fit,
        fit_pair_set,
        format_fit,
        holdout_rows,
        plot_fit,
        preset_yaml,
        provenance_sources,
    )

    table, tables = _judge_tables(args)
    if len(tables) != 1:
        raise ValueError(
            f"the files hold several judges ({', '.join(t[0] for t in tables)}): pick one with --judge"
        )
    label, _ = tables[0]
    holdout = set(args.holdout or [])
    sources = sorted({r.source for r in table.rows if r.judge == label})
    unknown = holdout - set(sources)
    if unknown:
        raise ValueError(f"--holdout {sorted(unknown)} not among the sources: {', '.join(sources)}")
    fit_on = [s for s in sources if s not in holdout]
    if getattr(args, "model", "gap") == "persistent":
        return _calibrate_persistent(args, table, label, sorted(holdout), fit_on)
    data = judge_data(table.select(label, fit_on), label)
    f = fit(data, n_sim=args.n_sim)
    name = Path(args.out).stem
    argv = ["arenabench", "calibrate", *args.files, "--judge", label]
    argv += [x for h in sorted(holdout) for x in ("--holdout", h)]
    argv += (["--description", args.description] if args.description else []) + ["--out", args.out]
    if args.n_sim != N_SIM:
        argv += ["--n-sim", str(args.n_sim)]
    command = shlex.join(argv)
    files = table.files_of(label, fit_on)
    desc = args.description or f"{label} on {', '.join(fit_on)}"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(preset_yaml(f, name, desc, provenance_sources(files), command))
    print(
        f"{name}: {desc}; {f.evaluations} evaluations, objective {f.objective:.3f}; wrote {args.out}",
        file=sys.stderr,
    )
    _emit(format_fit(f.rows, args.format), args.fit_table)
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_fit(f.rows, args.plot, f"{name}: fit on {', '.join(fit_on)}")
    if holdout:
        held = judge_data(table.select(label, sorted(holdout)), label)
        pair_set, predicted, measured = fit_pair_set(f, held, n_sim=args.n_sim)
        rows = holdout_rows(measured, predicted)
        _report_holdout(args, sorted(holdout), pair_set, rows, rows, f"{name}: predicted")
    return 0


def _report_holdout(args, holdout: list[str], pair_set: dict, rows, plot_rows, title: str) -> None:
    """The out-of-sample check of a fit (both models): its pair set, its table, its plot."""
    from arenabench.calibration.fit import format_fit, plot_fit

    print(
        f"\nout of sample on {', '.join(holdout)} (pair set: "
        + ", ".join(f"{k} {v:.3f}" for k, v in pair_set.items())
        + ")",
        file=sys.stderr,
    )
    _emit(format_fit(rows, args.format), args.holdout_table)
    if args.plot:
        stem = Path(args.plot)
        plot_fit(
            plot_rows,
            str(stem.with_name(stem.stem + "_holdout" + stem.suffix)),
            f"{title} on {', '.join(holdout)}",
        )


def _calibrate_persistent(args, table, label: str, holdout: list[str], fit_on: list[str]) -> int:
    """``calibrate --model persistent`` (``arenabench/calibration/persistent.py``)."""
    import math

    from arenabench.calibration import judge_data
    from arenabench.calibration.fit import N_SIM, format_fit, plot_fit, provenance_sources
    from arenabench.calibration.persistent import (
        fit_pair_set_persistent,
        fit_persistent,
        holdout_rows_persistent,
        persistent_preset_yaml,
    )

    data = judge_data(table.select(label, fit_on), label)
    f = fit_persistent(data, n_sim=args.n_sim)
    name = Path(args.out).stem
    argv = ["arenabench", "calibrate", *args.files, "--judge", label, "--model", "persistent"]
    argv += [x for h in holdout for x in ("--holdout", h)]
    argv += (["--description", args.description] if args.description else []) + ["--out", args.out]
    if args.n_sim != N_SIM:
        argv += ["--n-sim", str(args.n_sim)]
    command = shlex.join(argv)
    desc = args.description or f"{label} on {', '.join(fit_on)}"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    sources = provenance_sources(table.files_of(label, fit_on))
    Path(args.out).write_text(persistent_preset_yaml(f, name, desc, sources, command))
    print(
        f"{name}: {desc}; persistent model, {f.evaluations} evaluations, objective {f.objective:.3f}; "
        f"persistent_sd {f.params['persistent_sd']:.3f}, surface_beta {f.params['surface_beta']:.3f}, "
        f"persistent share {f.variance.get('persistent_share', math.nan):.3f}; wrote {args.out}",
        file=sys.stderr,
    )
    _emit(format_fit(f.rows, args.format), args.fit_table)
    if args.explain_table:
        _emit(format_explain(f.explain), args.explain_table)
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        title = f"{name}: persistent model, fit on {len(fit_on)} source(s)"
        plot_fit(_on_unit_scale(f.rows), args.plot, title)
    if holdout:
        held = judge_data(table.select(label, holdout), label)
        pair_set, predicted, measured = fit_pair_set_persistent(f, held, n_sim=args.n_sim)
        rows = holdout_rows_persistent(measured, predicted)
        _report_holdout(
            args, list(holdout), pair_set, rows, _on_unit_scale(rows), f"{name} (persistent): predicted"
        )
    return 0


def _on_unit_scale(rows: list[dict]) -> list[dict]:
    """The fit plot's rows without the ratio and the logit coefficients (off its 0-1 axis; in the table)."""
    return [r for r in rows if not r["statistic"].endswith(("_ratio", "_coef"))]


def format_explain(rows: list[dict]) -> str:
    """Markdown: measured (CI) beside the fitted persistent judge and its ablations."""
    import math

    cols = ["fitted", "no_persistent", "no_surface", "neither"]
    out = ["| statistic | measured [95% CI] | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for r in rows:
        ci = "" if math.isnan(r["lo"]) else f" [{r['lo']:.3f}, {r['hi']:.3f}]"
        cells = " | ".join(f"{r[c]:.3f}" for c in cols)
        out.append(f"| {r['statistic']} | {r['measured']:.3f}{ci} | {cells} |")
    return "\n".join(out)


def _seeds(text: str | None) -> list[int] | None:
    """``0-9`` or ``0,3,5`` → the list of ints (None: None)."""
    if not text:
        return None
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def cmd_sft(args) -> int:
    """``sft list | verify | publish``: the shipped SFT checkpoints (trainers/local/sft.py)."""
    import yaml

    from arenabench.trainers.local import sft

    if args.action == "list":
        for key, e in sft.manifest().items():
            print(
                f"{key}  sha256 {e['sha256'][:16]}…  {e['name']}  "
                f"(built with torch {e['torch']}, {e['cpu_capability']})"
            )
        return 0
    if args.action == "verify":
        rows = sft.verify_published(keys=set(args.keys) if args.keys else None)
        for r in rows:
            state = "match" if r["match"] else "MISMATCH"
            print(
                f"{state:8}  {r['name']:<44} published {r['published'][:16]}…  rebuilt {r['rebuilt'][:16]}…  "
                f"max |Δparam| {r['max_abs_diff']:.3g}  ({r['wall_s']:.0f} s)"
            )
        bad = [r for r in rows if not r["match"]]
        if bad:
            print(
                f"\nMISMATCH: {len(bad)} of {len(rows)} SFT checkpoints rebuilt on this CPU differ from the "
                "shipped ones. Runs still start from the shipped files (loaded, never rebuilt), so the "
                "published tables reproduce; a configuration that is not shipped will start from a "
                "checkpoint that depends on this CPU (docs/reproducibility.md).",
                file=sys.stderr,
            )
        return 1 if bad else 0
    task_cfg = yaml.safe_load((CONF / "task" / f"{args.task}.yaml").read_text())
    init_cfg = yaml.safe_load((CONF / "init" / f"{args.init}.yaml").read_text())
    tc = yaml.safe_load((CONF / "trainer" / f"{args.trainer}.yaml").read_text())
    from arenabench.trainers.local.task import TASKS

    conf = dict(task_cfg)
    task = TASKS.get(conf.pop("name"), **conf)
    dims = sft.model_dims(
        sft.TinyLM(task.vocab, task.prompt_len + task.response_len, tc["d_model"], tc["n_layer"],
                   tc["n_head"], tie_head=tc.get("tie_head", True))
    )  # fmt: skip
    for seed in _seeds(args.seeds) or [init_cfg.get("seed", 0)]:
        icfg = sft.InitConfig.of({**init_cfg, "seed": seed})
        name = f"task={args.task} init={args.init} init.seed={seed}"
        e = sft.publish(task_cfg, dims, icfg, name)
        print(f"published {name}: sha256 {e['sha256'][:16]}…  ({e['file']})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="arenabench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "list", help="constructors (first sentence, parameters), judge presets, conf variants"
    ).set_defaults(fn=cmd_list)
    f = sub.add_parser("fidelity", help="rank fidelity of constructors on simulated groups")
    f.add_argument(
        "--constructors",
        help="comma-separated names or name:key=value specs, e.g. rrc_scr:cara=true (default: all)",
    )
    f.add_argument("--group-size", "-N", type=int, default=8)
    f.add_argument("--groups", "-G", type=int, default=500)
    f.add_argument(
        "--judge",
        default="calibrated",
        help="simulated judge preset or fitted judge (conf/judge/NAME.yaml): see arenabench list",
    )
    f.add_argument("--seed", type=int, default=0)
    f.add_argument(
        "--order",
        choices=ORDER_POLICIES,
        help="slot-order policy for every constructor whose spec names none (default: each one's "
        "own, i.e. both); the row's name gets :order=...",
    )
    f.add_argument(
        "--diagnostics",
        action="store_true",
        help="add the judge's health over the row's comparisons: position consistency, tie, "
        "cycle and failure rates",
    )
    f.add_argument("--format", default="table", choices=FIDELITY_FORMATS)
    f.add_argument("--output", "-o", help="write the table/json/csv here instead of stdout")
    f.add_argument("--plot", help="write the fidelity-vs-judge-calls frontier PNG here")
    f.set_defaults(fn=cmd_fidelity)
    c = sub.add_parser("compare", help="final metrics over seeds per setting, from MLflow runs")
    c.add_argument("--experiment", "-e", required=True, help="MLflow experiment (the config's name)")
    c.add_argument(
        "--metric",
        default=PRIMARY_METRIC,
        help=f"metric to summarize (its last value per run; default: the primary metric, {PRIMARY_METRIC})",
    )
    c.add_argument(
        "--by",
        default="setting",
        help="tag to group runs by: setting (default: the arm, i.e. the job's overrides less the seed), "
        "reward (the conf/reward file), constructor (pools variants such as pointwise_budget: warned)",
    )
    c.add_argument("--sweep", default="latest", help="latest (default), all, or a sweep id")
    c.add_argument("--plot", help="write the metric's mean ± std learning curves per group (PNG) here")
    c.add_argument("--format", default="table", choices=("table", "markdown", "csv", "json"))
    c.add_argument(
        "--stats",
        action="store_true",
        help="per arm: mean and t CI over seeds of the final value and of the curve's AUC, judge calls",
    )
    c.add_argument(
        "--baseline",
        help="arm to pair against by seed (implies --stats): differences, paired t CIs, p-values; "
        "an exact --by value or a reward name (reward=<name> in the setting)",
    )
    c.add_argument(
        "--reach",
        type=float,
        help="(implies --stats) first step reaching start + f*(baseline final - start) (own final "
        "without --baseline), e.g. 0.5",
    )
    c.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    c.add_argument(
        "--against",
        help="a committed per-run table (results/train/<experiment>_runs.csv): diff this store's runs "
        "against it run by run (matched on arm and seed); prints the differing values and a summary, "
        "exit status 1 if anything differs",
    )
    c.add_argument("--all-rows", action="store_true", help="with --against: list equal values too")
    c.add_argument("--output", "-o", help="write the table here instead of stdout")
    c.add_argument(
        "--uri",
        help="tracking URI (default: $MLFLOW_TRACKING_URI, else results/mlflow.db if it exists, else "
        "make demo's results/demo/mlflow.db)",
    )
    c.set_defaults(fn=cmd_compare)
    from arenabench.calibration.stats import FORMATS as STAT_FORMATS
    from arenabench.calibration.stats import N_BOOT

    files_help = "judgment files or folders: LLMBar result.json, FastChat *_pair/_single.jsonl, our .jsonl"
    s = sub.add_parser(
        "judge-stats", help="a real judge's statistics from recorded judgments, with bootstrap CIs"
    )
    s.add_argument("files", nargs="+", help=files_help)
    s.add_argument("--judge", help="only this judge (default: every judge in the files)")
    s.add_argument(
        "--by",
        choices=("judge", "source"),
        default="judge",
        help="one block per judge or per judge and source",
    )
    s.add_argument("--boot", type=int, default=N_BOOT, help="bootstrap replicates over items (seed 0)")
    s.add_argument("--format", default="markdown", choices=STAT_FORMATS)
    s.add_argument("--output", "-o", help="write the table here instead of stdout")
    s.set_defaults(fn=cmd_judge_stats)
    k = sub.add_parser("calibrate", help="fit a simulated judge (kind ordinal) to recorded judgments")
    k.add_argument("files", nargs="+", help=files_help)
    k.add_argument("--out", required=True, help="the preset YAML to write, e.g. conf/judge/NAME.yaml")
    k.add_argument("--judge", help="the judge to fit (needed when the files hold several)")
    k.add_argument(
        "--holdout",
        action="append",
        help="a source to leave out of the fit and predict (repeatable), e.g. llmbar/Natural",
    )
    k.add_argument("--description", help="one line for the YAML's header")
    k.add_argument(
        "--n-sim",
        type=int,
        default=20000,
        help="simulated pairs per evaluation (common random numbers, fixed seed)",
    )
    k.add_argument("--format", default="markdown", choices=STAT_FORMATS)
    k.add_argument("--fit-table", help="write the goodness-of-fit table here instead of stdout")
    k.add_argument("--holdout-table", help="write the out-of-sample table here instead of stdout")
    k.add_argument("--plot", help="write the fit plot (PNG) here; with --holdout also <stem>_holdout.png")
    k.add_argument(
        "--model",
        choices=("gap", "persistent"),
        default="gap",
        help="gap: persistent errors folded into the perceived gap (the committed presets); persistent: "
        "a per-response persistent error and a length term fitted too (needs gold; docs/calibration.md)",
    )
    k.add_argument("--explain-table", help="--model persistent: write what each error term explains here")
    k.set_defaults(fn=cmd_calibrate)
    s = sub.add_parser(
        "sft",
        help="the shipped SFT checkpoints: list them, verify (rebuild on this CPU and compare hashes), "
        "publish (maintainers: build and ship one)",
    )
    s.add_argument("action", choices=("list", "verify", "publish"))
    s.add_argument("--keys", nargs="*", help="verify: only these checkpoint keys (default: all)")
    s.add_argument("--task", default="preference", help="publish: conf/task file")
    s.add_argument("--init", default="sft", help="publish: conf/init file")
    s.add_argument("--trainer", default="grpo", help="publish: conf/trainer file (model size)")
    s.add_argument("--seeds", help="publish: init seeds, e.g. 0-9 (default: the init file's seed)")
    s.set_defaults(fn=cmd_sft)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"arenabench: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    import warnings

    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning  # one line each, no source location
        try:
            return args.fn(args)
        except (ValueError, TypeError, KeyError) as exc:  # bad config/input: one clear line
            print(f"arenabench: error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())

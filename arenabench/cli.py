"""``arenabench`` command line: ``list``, ``fidelity``, ``compare`` (training: ``arenabench-train``)."""

from __future__ import annotations

import argparse
import re
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
    if CONF.is_dir():
        print(f"\nconf variants (arenabench-train GROUP=NAME; files in {CONF}):")
        same = {"reward": set(rewards.names()), "judge": set(PRESETS)}  # listed above by name
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


def cmd_compare(args) -> int:
    from arenabench.compare import format_summary, load_runs, metric_curves, summarize

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
    f.add_argument("--judge", default="calibrated", help="simulated judge preset (arenabench list)")
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
    c.add_argument("--output", "-o", help="write the table here instead of stdout")
    c.add_argument(
        "--uri", help="tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///results/mlflow.db)"
    )
    c.set_defaults(fn=cmd_compare)
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

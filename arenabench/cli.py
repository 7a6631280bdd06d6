"""``arenabench`` command line: ``list`` and ``fidelity`` (training sweeps use hydra)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from arenabench import judges, rewards
from arenabench.fidelity import FORMATS, format_rows, plot_frontier, run_fidelity


def _doc_line(obj) -> str:
    return (obj.__doc__ or "").strip().splitlines()[0] if obj.__doc__ else ""


def cmd_list(args) -> int:
    print("reward constructors:")
    for name in rewards.names():
        cls = rewards.REGISTRY.lookup(name)
        params = ", ".join(
            f"{f.name}={f.default_factory() if f.default is dataclasses.MISSING else f.default!r}"
            for f in dataclasses.fields(cls)
            if f.init
        )
        print(f"  {name:<20} {_doc_line(cls)}")
        print(f"  {'':<20} params: {params}")
    print("judge presets:")
    for name in judges.presets():
        print(f"  {name:<20} {judges.PRESETS[name]}")
    return 0


def _constructor_list(text: str | None) -> list[str] | None:
    if not text:
        return None
    names = [s.strip() for s in text.split(",") if s.strip()]
    for n in names:
        rewards.from_spec(n)  # one clear error for a bad name or parameter
    return names


def cmd_fidelity(args) -> int:
    rows = run_fidelity(
        constructors=_constructor_list(args.constructors),
        group_size=args.group_size,
        n_groups=args.groups,
        judge=args.judge,
        seed=args.seed,
    )
    text = format_rows(rows, args.format)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text + "\n")
    else:
        print(text)
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_frontier(
            rows, args.plot, title=f"Fidelity per judge call (judge={args.judge}, N={args.group_size})"
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="arenabench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="registered constructors and judge presets").set_defaults(fn=cmd_list)
    f = sub.add_parser("fidelity", help="rank fidelity of constructors on simulated groups")
    f.add_argument(
        "--constructors",
        help="comma-separated names or name:key=value specs, e.g. rrc_scr:cara=true (default: all)",
    )
    f.add_argument("--group-size", "-N", type=int, default=8)
    f.add_argument("--groups", "-G", type=int, default=500)
    f.add_argument("--judge", default="calibrated", help=f"judge preset: {', '.join(judges.presets())}")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--format", default="table", choices=FORMATS)
    f.add_argument("--output", "-o", help="write the table/json/csv here instead of stdout")
    f.add_argument("--plot", help="write the fidelity-vs-judge-calls frontier PNG here")
    f.set_defaults(fn=cmd_fidelity)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, KeyError) as exc:  # bad config/input: one clear line
        print(f"arenabench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Benchmarks (issue 6): ``python benchmarks/run_all.py --out results/bench [--quick]``."""

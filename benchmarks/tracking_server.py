"""Metric points per second into a sqlite store vs an MLflow tracking server (issue 44.2).

    python benchmarks/tracking_server.py [--steps 200] [--metrics 40] [--repeat 3]

A trainer-shaped load: ``--steps`` steps of ``--metrics`` metrics each, logged through
:class:`arenabench.tracking.RunLogger` with ``flush_every=50`` (the default), into (a) a sqlite
file (the bulk insert, :mod:`arenabench.tracking.bulk`) and (b) a real ``mlflow server`` on
127.0.0.1 with its own sqlite backend (the REST ``log_batch`` path, at most 1000 points a
request). Wall time of the logging and flushing alone (run creation excluded); the median of
``--repeat`` runs. Writes ``results/bench/tracking_server.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    cmd = [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
           f"sqlite:///{folder / 'server.db'}", "--artifacts-destination", str(folder / "artifacts"),
           "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return proc, uri
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("mlflow server did not start")


def points_per_s(uri: str, steps: int, n_metrics: int) -> float:
    from arenabench.tracking import RunLogger, get_or_create_experiment, open_client

    client = open_client(uri)
    run_id = client.create_run(get_or_create_experiment(client, "bench", uri)).info.run_id
    logger = RunLogger(run_id, uri, flush_every=50, client=client)
    names = [f"metric_{i}" for i in range(n_metrics)]
    t = time.perf_counter()
    for step in range(steps):
        logger.log_metrics({k: 0.001 * i + step for i, k in enumerate(names)}, step=step)
    logger.flush()
    wall = time.perf_counter() - t
    assert len(client.get_metric_history(run_id, names[-1])) == steps
    return steps * n_metrics / wall


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--metrics", type=int, default=40)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "results" / "bench" / "tracking_server.md"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        proc, server = start_server(folder)
        try:
            stores = {"sqlite file (bulk insert)": f"sqlite:///{folder / 'local.db'}",
                      "MLflow server, sqlite backend (REST log_batch)": server}  # fmt: skip
            rates = {name: [] for name in stores}
            for _ in range(args.repeat):  # interleaved: both see the same load
                for name, uri in stores.items():
                    rates[name].append(points_per_s(uri, args.steps, args.metrics))
        finally:
            proc.kill()
            proc.wait()
    med = {k: statistics.median(v) for k, v in rates.items()}
    base = med["sqlite file (bulk insert)"]
    lines = [
        "# Metric points/s: sqlite file vs MLflow tracking server",
        "",
        f"`python benchmarks/tracking_server.py --steps {args.steps} --metrics {args.metrics} "
        f"--repeat {args.repeat}` ({args.steps * args.metrics} points per run, `flush_every=50`; "
        f"median of {args.repeat}; wall time of logging + flushing; {platform.node()}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}). The server runs on the same "
        "machine (127.0.0.1): a remote one adds the network's round trips, one per 1000 points.",
        "",
        "| store | points/s | runs | vs sqlite |",
        "|---|---:|---|---:|",
    ]
    for name, v in rates.items():
        each = ", ".join(f"{x:,.0f}" for x in v)
        lines.append(f"| {name} | {med[name]:,.0f} | {each} | {med[name] / base:.2f}x |")
    per_job = args.steps * 40 / med["MLflow server, sqlite backend (REST log_batch)"]
    lines += ["", f"A table2 job logs ~{args.steps} steps x ~40 metrics: {per_job:.2f} s of logging against "
              "the server (measured above)."]  # fmt: skip
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

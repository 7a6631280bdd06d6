"""The judge-outage soak (issue 29, item 4): a local-trainer run against a real served judge
that is SIGKILLed and restarted at seeded random moments, with 10% injected request faults.

    python experiments/soak.py --out results/soak            # make soak: 500 steps, 8 outages
    python experiments/soak.py --steps 30 --outages 2 ...    # the short version (tests/test_soak.py)

The served judge is the project's served test judge (``arenabench/judges/stub_server.py``, a
stdlib process: cheap on two busy cores, where ``vllm serve`` on the tiny model would spend most
of the soak generating). A chaos thread waits for each outage's seeded step, waits a seeded
fraction of a step more (so the kill finds requests in flight), SIGKILLs the server, keeps it
down a seeded 1-20 s and starts it again on the same port. Judge faults: ``FaultyJudge`` at
``rate`` (all kinds) in front of the served judge; the judgment cache in front of both.

What it checks (and writes to ``<out>/soak.json``, ``soak.md``, ``steps.csv``):

* the run finishes all its steps;
* no group is scored on partial evidence: the soak runs with ``engine.max_failed_share=0``, so a
  group with any failed request (an injected fault past the engine's retries, or a request lost
  to an outage) trains with advantage 0; every step's ``masked_groups`` equals its number of
  groups with a failure, and every group with a lost request is among them;
* the counters add up, per step and in total: at the HTTP client, ``backend calls = answered +
  resent + lost``; at the engine, ``judge_calls = cache hits + misses``; every cache miss was
  either faulted or sent (``misses = faults + answered + lost``); and every injected fault was
  re-asked or counted (``faults = engine retries + engine failures - lost``);
* a rerun with the same seed on the judgment cache -- the server not running at all -- pays no
  backend call and reproduces every step's rewards and advantages bit for bit.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

from arenabench.advantages import is_masked
from arenabench.judges.stub_server import ServerProcess, free_port
from arenabench.trainers.local.trainer import train

COUNTERS = (
    "judge_backend_calls",
    "judge_answered",
    "judge_resent",
    "judge_lost",
    "judge_outage_s",
    "cache_hits",
    "cache_misses",
    "masked_groups",
    "outage_groups",
)


class Chaos(threading.Thread):
    """Kills and restarts ``server`` at the seeded plan's steps (bounded: stops with the run)."""

    def __init__(self, server: ServerProcess, plan: list[dict]):
        super().__init__(name="soak-chaos", daemon=True)
        self.server, self.plan = server, plan
        self.done_step = -1  # the last step the trainer finished (on_step)
        self.stop = threading.Event()
        self.log: list[dict] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for o in self.plan:
                while self.done_step < o["step"] - 1:  # wait for the step to start
                    if self.stop.wait(0.01):
                        return
                if self.stop.wait(o["delay_s"]):
                    return
                t0 = time.monotonic()
                self.server.kill()
                _say(f"outage {len(self.log) + 1}: killed at step {self.done_step + 1}, down {o['down_s']} s")
                self.stop.wait(o["down_s"])  # a run ending early cuts the outage short
                self._restart()
                self.log.append({**o, "measured_down_s": time.monotonic() - t0})
                _say(f"outage {len(self.log)}: back after {self.log[-1]['measured_down_s']:.2f} s")
        except BaseException as exc:  # noqa: BLE001 -- reported by the main thread
            self.error = exc

    def _restart(self, tries: int = 5) -> None:
        """Start the server again; a failed start is retried (bounded) and then raised."""
        for k in range(tries):
            try:
                self.server.start()
                return
            except RuntimeError as exc:
                _say(f"restart {k + 1} of {tries} failed: {exc}")
                if k == tries - 1:
                    raise
                time.sleep(1.0)


def _say(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def outage_plan(steps: int, outages: int, seed: int, down=(1.0, 20.0)) -> list[dict]:
    """``outages`` seeded outages: distinct start steps in [1, steps - 2], a kill delay within the
    step (0-0.3 s), a down time uniform in ``down``."""
    if outages > max(steps - 2, 0):
        raise ValueError(f"{outages} outages need at least {outages + 2} steps; got {steps}")
    rng = np.random.default_rng([seed, 29])
    starts = np.sort(rng.choice(np.arange(1, steps - 1), size=outages, replace=False))
    return [
        {
            "step": int(s),
            "delay_s": round(float(rng.uniform(0.0, 0.3)), 3),
            "down_s": round(float(rng.uniform(*down)), 3),
        }
        for s in starts
    ]


def run_config(steps: int, seed: int, url: str, cache: Path, fault_rate: float, deadline_s: float) -> dict:
    return {
        "seed": seed,
        "steps": steps,
        "prompts_per_step": 4,
        "group_size": 4,
        "eval_every": 0,
        "probe_size": 0,
        "progress": False,
        "engine": {"max_retries": 2, "max_failed_share": 0.0, "schedule": "pipelined"},
        "reward": {"name": "round_robin"},
        "task": {"name": "preference"},
        "init": {"kind": "random"},
        "judge": {
            "kind": "openai",
            "base_urls": [url],
            "model": "stub",
            "api_key_env": None,
            "max_concurrency": 8,
            "timeout_s": 10.0,
            "retries": 2,
            "backoff_s": 0.1,
            "max_backoff_s": 2.0,
            "outage_deadline_s": deadline_s,
            "cache": str(cache),
            "faults": {"rate": fault_rate, "seed": seed} if fault_rate else None,
        },
    }


class Record:
    """The tracker ``train`` logs to, and each step's rewards/advantages/masking (``on_step``)."""

    def __init__(self, chaos: Chaos | None = None):
        self.metrics: dict[int, dict] = {}
        self.rewards: dict[int, list] = {}
        self.groups: dict[int, dict] = {}
        self.chaos = chaos

    def log_metrics(self, metrics, step):
        self.metrics[step] = dict(metrics)

    def on_step(self, step, groups, out):
        if step % 50 == 0:
            _say(f"step {step}")
        self.rewards[step] = [(r.reward.copy(), r.advantage.copy()) for r in out.results]
        self.groups[step] = {
            "failed": sum(r.failures > 0 for r in out.results),
            "lost": sum(r.lost > 0 for r in out.results),
            "lost_unmasked": sum(r.lost > 0 and not is_masked(r, 0.0) for r in out.results),
            "failed_unmasked": sum(r.failures > 0 and not is_masked(r, 0.0) for r in out.results),
        }
        if self.chaos is not None:
            self.chaos.done_step = step


def check(rec: Record, steps: int) -> dict:
    """The soak's invariants (raises AssertionError naming the first that fails) and its totals."""
    assert sorted(rec.metrics) == list(range(steps)), "the run did not finish every step"
    tot = {k: 0.0 for k in COUNTERS}
    for s in range(steps):
        m, g = rec.metrics[s], rec.groups[s]
        for k in COUNTERS:
            tot[k] += m[k]
        assert m["judge_backend_calls"] == m["judge_answered"] + m["judge_resent"] + m["judge_lost"], s
        assert m["masked_groups"] == g["failed"], f"step {s}: masked {m['masked_groups']} != failed {g}"
        assert g["lost_unmasked"] == g["failed_unmasked"] == 0, f"step {s}: scored on partial evidence"
        assert m["outage_groups"] == g["lost"], s
    last = rec.metrics[steps - 1]
    assert tot["cache_hits"] + tot["cache_misses"] == last["judge_calls"]
    faults = last.get("judge_faults", 0.0)
    assert tot["cache_misses"] == faults + tot["judge_answered"] + tot["judge_lost"]
    assert faults == last["judge_retries"] + last["judge_failures"] - tot["judge_lost"]
    return {
        **{k: (round(v, 3) if k == "judge_outage_s" else int(v)) for k, v in tot.items()},
        "engine_judge_calls": int(last["judge_calls"]),
        "engine_retries": int(last["judge_retries"]),
        "engine_failures": int(last["judge_failures"]),
        "injected_faults": int(faults),
        "groups": steps * 4,
        "groups_with_failure": sum(rec.groups[s]["failed"] for s in range(steps)),
        "groups_lost_to_outage": sum(rec.groups[s]["lost"] for s in range(steps)),
    }


def soak(
    out: Path,
    steps: int = 500,
    outages: int = 8,
    seed: int = 0,
    fault_rate: float = 0.1,
    down=(1.0, 20.0),
    deadline_s: float = 120.0,
    command: str | None = None,
) -> dict:
    """Run the soak and its rerun on the cache; return (and write) the summary."""
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "judgments.sqlite"
    for p in out.glob("judgments.sqlite*"):
        p.unlink()
    (out / "server.log").unlink(missing_ok=True)
    (out / "server.log.stderr").unlink(missing_ok=True)
    port = free_port()
    server = ServerProcess(port, log=out / "server.log")
    plan = outage_plan(steps, outages, seed, down)
    cfg = run_config(steps, seed, server.url, cache, fault_rate, deadline_s)
    chaos = Chaos(server, plan)
    rec = Record(chaos)
    t0 = time.perf_counter()
    server.start()
    try:
        chaos.start()
        train(cfg, tracker=rec, progress=False, on_step=rec.on_step)
    finally:
        chaos.stop.set()
        chaos.join(timeout=60)
        server.kill()
    wall = time.perf_counter() - t0
    if chaos.error is not None:
        raise RuntimeError(f"the chaos thread failed: {chaos.error!r}")
    totals = check(rec, steps)
    assert len(chaos.log) == outages, f"{len(chaos.log)} of {outages} outages happened"

    # the rerun: same seed, the cache, and no server at all (a miss would be lost in 1 s)
    again = Record()
    t1 = time.perf_counter()
    rerun_cfg = run_config(steps, seed, server.url, cache, fault_rate, 1.0)
    train(rerun_cfg, tracker=again, progress=False, on_step=again.on_step)
    rerun_wall = time.perf_counter() - t1
    rerun = check(again, steps)
    same = all(
        np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        for s in range(steps)
        for a, b in zip(rec.rewards[s], again.rewards[s], strict=True)
    )
    assert rerun["judge_backend_calls"] == 0, f"the rerun paid {rerun['judge_backend_calls']} backend calls"
    assert same, "the rerun on the cache did not reproduce the rewards"
    served = (out / "server.log").read_text().split()
    summary = {
        "command": command or f"soak(steps={steps}, outages={outages}, seed={seed})",
        "steps": steps,
        "seed": seed,
        "fault_rate": fault_rate,
        "outage_deadline_s": deadline_s,
        "served_judge": "arenabench/judges/stub_server.py (stdlib, deterministic), SIGKILLed and restarted",
        "outages": len(chaos.log),
        "outage_down_s": [round(o["measured_down_s"], 2) for o in chaos.log],
        "outage_plan": plan,
        "server_starts": server.starts,
        "server_200s_written": served.count("200"),
        "totals": totals,
        "wall_s": round(wall, 1),
        "rerun": {
            "wall_s": round(rerun_wall, 1),
            "backend_calls": rerun["judge_backend_calls"],
            "cache_hits": rerun["cache_hits"],
            "cache_misses": rerun["cache_misses"],
            "rewards_identical": same,
            "steps_compared": steps,
        },
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }
    (out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    with (out / "steps.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", *COUNTERS])
        for s in range(steps):
            w.writerow([s, *(rec.metrics[s][k] for k in COUNTERS)])
    (out / "soak.md").write_text(render(summary))
    for p in [*out.glob("judgments.sqlite*"), out / "server.log", out / "server.log.stderr"]:
        p.unlink(missing_ok=True)  # by-products, not results
    return summary


def render(s: dict) -> str:
    t, r = s["totals"], s["rerun"]
    down = s["outage_down_s"]
    rows = [
        ("wall time", f"{s['wall_s']} s"),
        ("outage seconds seen by the client", t["judge_outage_s"]),
        (
            "HTTP posts = answered + resent + lost",
            f"{t['judge_backend_calls']} = {t['judge_answered']} + {t['judge_resent']} + {t['judge_lost']}",
        ),
        ("server replies written (200)", s["server_200s_written"]),
        (
            "engine requests = cache hits + misses",
            f"{t['engine_judge_calls']} = {t['cache_hits']} + {t['cache_misses']}",
        ),
        (
            "injected faults = engine retries + failures - lost",
            f"{t['injected_faults']} = {t['engine_retries']} + {t['engine_failures']} - {t['judge_lost']}",
        ),
        (
            "groups / with a failed request / masked",
            f"{t['groups']} / {t['groups_with_failure']} / {t['masked_groups']}",
        ),
        ("groups that lost a request to an outage", t["groups_lost_to_outage"]),
        ("rerun on the cache, no server: wall, backend calls", f"{r['wall_s']} s, {r['backend_calls']}"),
        (f"rerun rewards and advantages identical ({r['steps_compared']} steps)", r["rewards_identical"]),
    ]
    table = "| | |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows)
    return f"""# Judge-outage soak

`{s["command"]}` ({s["steps"]} steps, seed {s["seed"]}, `make soak`; the code: `experiments/soak.py`).

Served judge: {s["served_judge"]}; {s["outages"]} outages
(down {min(down):.1f}-{max(down):.1f} s, {sum(down):.1f} s in all; the server started
{s["server_starts"]} times); injected faults at rate {s["fault_rate"]} in front of it; outage
deadline {s["outage_deadline_s"]:g} s.

{table}

Every outage was shorter than the deadline, so no request was lost: the client resent what each
kill took (with the same body, so the same answer) and the step went on. The server wrote a few
more replies than the client read: replies written just as a kill came, lost with the
connection and resent. Masked groups are those where an injected fault survived the engine's 2
re-asks (`max_failed_share=0`: no group trains on partial evidence). The rerun's cache misses
are those requests again: failures are never cached, and the same faults hit the same attempts.
Per step: `steps.csv`; everything: `soak.json`.
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="the judge-outage soak (issue 29)")
    ap.add_argument("--out", type=Path, default=Path("results/soak"))
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--outages", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fault-rate", type=float, default=0.1)
    ap.add_argument("--down", type=float, nargs=2, default=(1.0, 20.0), metavar=("MIN_S", "MAX_S"))
    a = ap.parse_args(argv)
    command = " ".join(["python", "experiments/soak.py", *(argv if argv is not None else sys.argv[1:])])
    s = soak(a.out, a.steps, a.outages, a.seed, a.fault_rate, tuple(a.down), command=command)
    print(json.dumps({k: s[k] for k in ("outages", "totals", "wall_s", "rerun")}, indent=2))


if __name__ == "__main__":
    main()

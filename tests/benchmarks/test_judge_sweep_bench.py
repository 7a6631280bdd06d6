"""benchmarks/judge_sweep_speed.py: it runs the persistent stages' arms (read from the script that
runs them), and its page states each judge's times and the ratios to the first."""

from helpers import ROOT

from benchmarks import judge_sweep_speed as js


def test_arms_are_the_persistent_stages():
    text = (ROOT / "scripts" / "regenerate_tables.sh").read_text()
    arms = js.judge_arms()
    assert f"JUDGE_ARMS={arms}\n" in text
    assert {"pointwise", "anchor", "round_robin", "seeded_single_elim"} <= set(arms.split(","))


def test_page_ratios_and_goal(tmp_path):
    row = {"jobs": 80, "wall_s": 240.0, "cpu_s": 480.0, "jobs_cpu_s": 400.0, "peak_rss_mib": 800.0,
           "load_before": 0.1, "load_after": 2.0}  # fmt: skip
    rows = [{"judge": "fresh", **row}, {"judge": "persistent", **row, "wall_s": 300.0, "cpu_s": 720.0}]
    js.report(tmp_path, rows, "pointwise,anchor", 10, 200, False, {"cpu": "test"})
    page = (tmp_path / "judge_sweep.md").read_text()
    assert "| `fresh` | 80 | 4.00 | 4.00 | 5.00 | 800 | 0.1 → 2.0 | 1.00× | 1.00× |" in page
    assert "| `persistent` | 80 | 5.00 | 6.00 | 5.00 | 800 | 0.1 → 2.0 | 1.25× | 1.50× |" in page
    assert "**not met**" in page  # CPU / 2 = 6 min > 5
    assert "--judges fresh,persistent" in page

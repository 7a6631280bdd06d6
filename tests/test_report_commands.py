"""The "Command:" line of a generated page (experiments/table2_report.sweep_command): the overrides
that reproduce the runs, without where they were stored."""

import importlib.util
import sys

import pandas as pd
from helpers import ROOT

sys.path.insert(0, str(ROOT / "experiments"))
spec = importlib.util.spec_from_file_location("table2_report", ROOT / "experiments" / "table2_report.py")
t2 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t2)


def test_command_keeps_a_subset_and_drops_the_store_path():
    runs = pd.DataFrame(
        {
            "overrides": [
                f"experiment=table2_hard reward={arm} seed={seed} "
                "tracking.uri=sqlite:////abs/results/mlflow.db "
                "progress=false hydra.sweep.dir=x"
                for arm in ("pointwise", "anchor")
                for seed in (0, 1)
            ]
        }
    )
    cmd = t2.sweep_command("table2_hard", runs)
    assert cmd.startswith("arenabench-train -m experiment=table2_hard ")
    assert "reward=pointwise,anchor" in cmd
    assert "tracking.uri" not in cmd and "/abs/" not in cmd and "progress" not in cmd and "hydra" not in cmd

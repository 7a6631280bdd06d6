"""The judge-outage soak's short version (``make soak`` runs 500 steps): a real served test judge
process SIGKILLed and restarted twice mid-run, 10% injected faults; ``experiments/soak.py``
asserts its invariants (the run finishes, no group trains on partial evidence, the counters add
up, a rerun on the cache with no server reproduces every reward) and this test reads them back."""

import json
import sys

import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow
pytest.importorskip("aiohttp")


def test_short_soak_survives_outages_and_reruns_from_the_cache(tmp_path):
    sys.path.insert(0, str(ROOT / "experiments"))
    try:
        import soak
    finally:
        sys.path.remove(str(ROOT / "experiments"))
    s = soak.soak(tmp_path, steps=8, outages=2, seed=1, fault_rate=0.1, down=(1.0, 1.5))
    t = s["totals"]
    assert s["outages"] == 2 and s["server_starts"] == 3
    assert t["judge_resent"] > 0 and t["judge_outage_s"] >= 2.0  # both outages were felt
    assert t["judge_lost"] == t["groups_lost_to_outage"] == 0  # shorter than the deadline
    assert t["judge_backend_calls"] == t["judge_answered"] + t["judge_resent"]
    assert t["injected_faults"] > 0 and t["masked_groups"] == t["groups_with_failure"]
    assert s["rerun"]["rewards_identical"] and s["rerun"]["backend_calls"] == 0
    assert json.loads((tmp_path / "soak.json").read_text())["totals"] == t
    assert not list(tmp_path.glob("judgments.sqlite*")) and not (tmp_path / "server.log").exists()

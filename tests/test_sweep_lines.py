"""The sweep launcher's per-job line (arenabench/sweep.py): k/n, elapsed, ETA from the jobs'
own clock, the summary, and a failure that names its log."""

from hydra.core.utils import JobReturn, JobStatus

from arenabench.sweep import job_line


def ret(status, value):
    r = JobReturn()
    r.status, r.return_value = status, value
    return r


def test_a_finished_job_line():
    info = {"wall_s": 12.34, "dir": "/x/3", "final": {"eval_sampled_quality": 2.8851, "judge_calls": 2000.0,
                                                      "steps": 200, "snr": 0.8}}  # fmt: skip
    line = job_line(
        3, 50, 200.0, ["reward=anchor", "seed=2"], ret(JobStatus.COMPLETED, 0.5), info, running=120.0
    )
    assert line.startswith("[ 3/50] 3:20 elapsed, ETA 31:20 | reward=anchor seed=2 | ")
    assert "eval_sampled_quality 2.885" in line and "10 judge calls/step" in line and "12.3 s" in line


def test_a_failed_job_names_its_error_and_log():
    info = {"wall_s": 1.0, "dir": "/x/7"}
    line = job_line(
        1, 2, 5.0, ["seed=1"], ret(JobStatus.FAILED, ValueError("steps must be >= 1\nmore")), info
    )
    assert line.endswith("| seed=1 | FAILED ValueError: steps must be >= 1 (log: /x/7/console.log)")
    assert "ETA 0:05" in line

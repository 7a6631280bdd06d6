"""Run tags: provenance and the tags ``arenabench compare`` groups runs by.

Both training apps (the local hydra app, ``arenabench/train.py``, and the verl launcher,
``arenabench/trainers/verl/launch.py``) tag their runs with :func:`build_job_tags`, so that
``compare`` reads local and verl runs alike; each app only reads its own hydra state.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

IDENTITY_TAG = "job_key"


def git_commit(path: str | os.PathLike = ".") -> str | None:
    """``git rev-parse HEAD`` in ``path``; None when that fails (no git, not a repository)."""
    try:
        p = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = p.stdout.strip()
    return sha if p.returncode == 0 and sha else None


def build_job_tags(
    overrides: Sequence[str],
    *,
    not_setting: tuple[str, ...],
    constructor: Any,
    reward: Any,
    seed: Any,
    sweep: Any,
    experiment: Any,
    commit: str,
    setting_head: Sequence[str] = (),
    strip: str = "",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The tags of one training job, all strings.

    ``setting`` — what ``compare`` averages seeds within — is ``setting_head`` plus the overrides
    that change what is computed: those that, after stripping the characters ``strip`` from
    their start (hydra's ``+``/``~``), do not start with one of ``not_setting``; ``"default"``
    when nothing is left. ``reward`` is the conf file the constructor came from, ``constructor``
    its registered name; ``extra`` tags (app-specific) are added last."""
    kept = (o for o in overrides if not o.lstrip(strip).startswith(not_setting))
    tags = {
        "constructor": constructor,
        "reward": reward,
        "setting": " ".join([*setting_head, *kept]) or "default",
        "seed": seed,
        "sweep": sweep,
        "overrides": " ".join(overrides),
        "experiment": experiment,
        "git_commit": commit,
        **(extra or {}),
    }
    return {k: str(v) for k, v in tags.items()}

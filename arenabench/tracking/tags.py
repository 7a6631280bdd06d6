"""Run tags: provenance (the code commit) and the tag that names a job across launches."""

from __future__ import annotations

import os
import subprocess

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

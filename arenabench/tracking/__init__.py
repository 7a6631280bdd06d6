"""Experiment tracking (MLflow). ``import arenabench.tracking`` stays light: mlflow itself is
imported only when a :class:`Tracker` is opened or a store is read."""

from arenabench.tracking.mlflow import DEFAULT_URI, Tracker, flatten, git_commit, lock_for, tracking_uri

__all__ = ["DEFAULT_URI", "Tracker", "flatten", "git_commit", "lock_for", "tracking_uri"]

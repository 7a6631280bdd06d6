"""Turning configs and results into what MLflow accepts: flat string params within its limits,
and JSON/YAML-safe artifacts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# MLflow's per-value / per-call limits (mlflow.utils.validation), restated so tracking need not
# import mlflow to apply them.
PARAM_VALUE_LIMIT = 6000
TAG_VALUE_LIMIT = 8000
METRICS_PER_BATCH = 1000
PARAMS_TAGS_PER_BATCH = 100


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in ``"..."`` when cut (MLflow rejects longer
    values instead of cutting them)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a (resolved) config into MLflow params keyed exactly as hydra overrides name
    them: ``{"reward": {"name": "anchor"}, "trainer": {"lr": 1e-5}}`` →
    ``{"reward.name": "anchor", "trainer.lr": "1e-05"}``.

    Nested mappings recurse (an empty one becomes ``"{}"``); every leaf is ``str()``-ed, so lists
    and tuples read as ``"[1, 2]"`` and None as ``"None"``. A value longer than MLflow's param
    limit (6000 characters) is truncated to it, ending in ``"..."``; the full config is still
    logged as the ``config.yaml`` artifact by the training app."""
    out: dict[str, str] = {}
    for k, v in cfg.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            if len(v):
                out.update(flatten(v, key))
                continue
            text = "{}"
        elif isinstance(v, Sequence) and not isinstance(v, str | bytes):
            text = str(list(v))
        else:
            text = str(v)
        out[key] = truncate(text, PARAM_VALUE_LIMIT)
    return out


def json_safe(obj: Any) -> Any:
    """numpy scalars/arrays and other odd leaves → plain JSON/YAML-serialisable values."""
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if hasattr(obj, "tolist"):  # numpy scalar or array
        return json_safe(obj.tolist())
    return str(obj)

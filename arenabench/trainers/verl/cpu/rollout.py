"""Old name of :mod:`arenabench.trainers.verl.hf_rollout` (kept so configs naming
``arenabench.trainers.verl.cpu.rollout.*`` classes still load)."""

from arenabench.trainers.verl.hf_rollout import (  # noqa: F401
    HFReplica,
    HFServer,
    HFServerAdapter,
    SessionAgentLoop,
    server_name,
)

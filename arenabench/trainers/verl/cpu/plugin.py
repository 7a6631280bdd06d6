"""Old name of :mod:`arenabench.trainers.verl.plugin` (the plugin serves GPU runs too since the
``hf`` rollout backend places its model on the GPU): importing it imports the new module, so
``VERL_USE_EXTERNAL_MODULES=arenabench.trainers.verl.cpu.plugin`` keeps working, with a warning."""

import warnings

from arenabench.trainers.verl.plugin import *  # noqa: F403
from arenabench.trainers.verl.plugin import on_cpu

warnings.warn(
    "arenabench.trainers.verl.cpu.plugin is now arenabench.trainers.verl.plugin (it serves GPU runs "
    "too); the old name will be removed",
    FutureWarning,
    stacklevel=2,
)
if on_cpu():
    from arenabench.trainers.verl.cpu.platform import PlatformCPU  # noqa: F401  (its old home)

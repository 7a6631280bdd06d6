"""The local CPU trainer. Importing it pins ATen's CPU kernel set for this process and the sweep
workers it starts (:func:`arenabench.numerics.pin_torch_kernels`, issue 40): the published runs
are the same on AVX2 and AVX-512 CPUs."""

from arenabench.numerics import pin_torch_kernels

TORCH_KERNELS = pin_torch_kernels()

# task=hackable lives in its own module on top of task.py's registry; importing it here registers it
# before anything can look a task up (task.py importing it back would be a cycle: tests/test_layers.py)
from arenabench.trainers.local import hackable  # noqa: E402, F401

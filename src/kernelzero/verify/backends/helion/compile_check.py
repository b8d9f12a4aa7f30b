"""Without a GPU: compile the Triton kernels Helion generated for the candidate, for the target GPU (sm_90).

Helion turns each `@helion.kernel` into a `@triton.jit` kernel and launches it through Triton, so Triton's
compile check (`backends/triton/compile_check.py`) applies unchanged: a second sandboxed worker without the
interpreter runs the forward once with every launch turned into a compile for the target; the first kernel that
does not compile makes the verdict `compile_error`. Helion's own code generation runs there too (on CPU tensors,
with the stub driver's target), so a kernel Helion cannot lower for the GPU fails here as well.
"""

from __future__ import annotations

from kernelzero.verify.backends.triton.compile_check import compile_check

__all__ = ["compile_check"]

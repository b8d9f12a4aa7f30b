"""`kernelzero optimize`: a fast kernel for one module, found by a model and verified at several sizes.

    from kernelzero.optimize import OptimizeConfig, run_optimize
    result = run_optimize(OptimizeConfig(module="my_module.py", model="openai:qwen2.5-coder-7b", budget=64, turns=4))
    result.kernel        # runs/optimize-my_module-triton/my_module_optimized.py (defines ModelNew), or None

    kernelzero optimize my_module.py --model openai:qwen2.5-coder-7b --backend triton --budget 64 --turns 4

Modules: inputs.py (the file as a task), sizes.py (half and double sizes), search.py (episodes in the kernel
environment within a budget), choose.py (re-verification and the choice), report.py (report.md and the kernel
file), run.py (the steps, resumable from the output folder).
"""

from __future__ import annotations

from kernelzero.optimize.inputs import ModuleInputError, load_module
from kernelzero.optimize.run import OptimizeConfig, OptimizeResult, run_optimize

__all__ = ["ModuleInputError", "OptimizeConfig", "OptimizeResult", "load_module", "run_optimize"]

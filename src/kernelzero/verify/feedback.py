"""Short feedback a Coder can act on, built from a Verdict (used in multi-turn loops and reports)."""

from __future__ import annotations

from kernelzero.types import Verdict

HINTS = {
    "format_error": "Answer with one ```python block that defines `class ModelNew(nn.Module)` "
    "with the same constructor arguments as `Model`.",
    "compile_error": "Fix the compile error below; check types, names and launch syntax.",
    "runtime_error": "ModelNew raised an exception; check argument types, shapes and devices.",
    "timeout": "The code ran too long; look for infinite loops or far too many launches.",
    "crash": "The process died: most often an out-of-bounds access; check index bounds and masks.",
    "oom": "Too much memory; avoid huge temporaries.",
    "shape_mismatch": "Return the same number of outputs with the same shapes as Model.forward.",
    "dtype_mismatch": "Return outputs in the same dtype as Model.forward.",
    "nan_or_inf": "Outputs hold NaN/Inf: check divisions, exp overflow, uninitialised memory.",
    "mismatch": "Values are wrong: check indexing, masks, reduction axes and accumulation precision.",
    "input_mutated": "Do not write into the inputs; allocate a new output tensor.",
    "compiled": "The CUDA source compiles for the target GPU; it has not been run.",
    "infra_error": "Not your fault: the verifier could not run this sample (an infrastructure fault), so it says "
    "nothing about your code; there is nothing to learn from this.",
    "task_broken": "Not your fault: the task's own reference code fails, so no kernel could be judged; there is "
    "nothing to learn from this.",
}


def feedback_for(verdict: Verdict, limit: int = 1200) -> str:
    """A few lines: what happened, the most useful detail, a hint."""
    if verdict.status == "correct":
        if verdict.speedup_eager is not None:
            return f"Correct; {verdict.speedup_eager:.2f}x the speed of PyTorch eager."
        return "Correct."
    lines = [f"{verdict.status}: {verdict.message}".strip()]
    if verdict.error_log and verdict.status in ("compile_error", "runtime_error", "crash"):
        useful = [ln for ln in verdict.error_log.splitlines() if "error" in ln.lower()][:8]
        lines += useful or verdict.error_log.splitlines()[-8:]
    if verdict.status in HINTS:
        lines.append(HINTS[verdict.status])
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 3] + "..."

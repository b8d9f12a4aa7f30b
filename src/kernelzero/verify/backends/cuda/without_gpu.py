"""CUDA candidates on a machine without a GPU: as far as a compiler goes.

The candidate's `load_inline` calls are captured in a child process (`capture.py`; nothing
is built or run), then each one's CUDA source is compiled for the target GPU with nvcc and its C++
source syntax-checked (`source.py`). The verdict is `compiled` (stage "build": nothing ran), or
`compile_error` with the compiler's first errors, or `format_error` / `runtime_error` when the
module does not even import that far. A candidate that never calls `load_inline` has no CUDA to
check: `compile_error` with that message (a CUDA candidate must build its kernels).
"""

from __future__ import annotations

import functools
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from kernelzero.types import Backend, Task, Verdict
from kernelzero.verify.backends.cuda.capture import CaptureError, capture_load_inline
from kernelzero.verify.backends.cuda.source import compile_check
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox.process import plan_for
from kernelzero.verify.verdicts import early_verdict


def verify_without_gpu(task: Task, source: str, backend: Backend, opts: VerifyOptions) -> Verdict:
    """The verdict of a CUDA candidate on a machine without a GPU (see the module docstring)."""
    _early = functools.partial(early_verdict, task, source, backend.name, opts)
    start = time.perf_counter()
    arch = f"sm_{opts.target_arch}"
    with tempfile.TemporaryDirectory(prefix="kz-cuda-") as tmp:
        path = Path(tmp, "candidate.py")
        path.write_text(source)
        try:
            builds = capture_load_inline(str(path), opts.build_timeout_s, plan_for(opts))
        except CaptureError as exc:
            status = (
                "format_error"
                if exc.exc_type == "SyntaxError"
                else "timeout"
                if exc.kind == "timeout"
                else "runtime_error"
            )
            return _early(status, "load", exc.message, error_log=exc.traceback_tail)
        if not builds:
            return _early(
                "no_kernel",
                "build",
                "the candidate builds no CUDA extension at import (no load_inline call)",
            )
        if not opts.compile_check:
            return _early(
                "compiled",
                "load",
                "compile check skipped (no GPU)",
                notes=("no GPU and compile_check off: only the import was checked",),
            )
        notes = []
        for i, build in enumerate(builds):
            result = compile_check(build, arch=arch, workdir=Path(tmp, f"build{i}"), timeout_s=opts.build_timeout_s)
            if result.ok is False:
                status = "timeout" if result.stage == "timeout" else "compile_error"
                return _early(
                    status,
                    "build",
                    f"{build.name}: {result.stage} compile failed for {arch}",
                    error_log=result.log_tail,
                )
            if result.ok is None:
                notes.append(f"{build.name}: could not be compile-checked here ({result.stage})")
            else:
                regs = f", max {result.max_registers} registers" if result.max_registers else ""
                notes.append(f"{build.name}: compiled for {arch} in {result.seconds:.1f} s{regs}")
    verdict = _early(
        "compiled",
        "build",
        "compiles for the target GPU; not run (no GPU here)",
        notes=tuple(notes),
        timing_note="no GPU: nothing ran",
    )
    return replace(verdict, stage_seconds={"compile_check": round(time.perf_counter() - start, 3)})

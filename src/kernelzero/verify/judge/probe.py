"""GPU health probe: after a sample broke its CUDA context, check the GPU in a fresh process.

`probe_gpu(index)` starts `python -m kernelzero.verify.judge.probe_child` pinned to one GPU; the child takes that
GPU's lease (verify/judge/lease.py), allocates memory, runs a matrix product and an elementwise kernel,
synchronises and compares with the CPU. The pool uses the GPU again only when the probe passes; it
never resets a GPU (a failing GPU is taken out of the pool and the verdicts say so). With
`device="cpu"` the same checks run on the CPU (how CI tests the mechanism); `"cuda-held"` skips taking
the lease (the caller holds it: see `lease.gpu_lease`, which runs the probe after a crash).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

from kernelzero.verify.sandbox.process import physical_gpu, source_root


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    seconds: float
    message: str  # what failed ('' when ok)
    busy: bool = False  # inconclusive: no GPU memory for the probe (probe_child.BUSY); `ok` is False


def probe_gpu(index: int | None, timeout_s: float = 120.0, device: str = "cuda") -> ProbeResult:
    """Probe visible GPU `index` (None: whatever this process sees) in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(source_root())}
    if index is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(index)
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernelzero.verify.judge.probe_child", device],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(False, time.monotonic() - start, f"the probe did not finish in {timeout_s:g} s")
    seconds = time.monotonic() - start
    if done.returncode == 0 and "probe ok" in done.stdout:
        return ProbeResult(True, seconds, "")
    if done.returncode == 3 and "probe busy" in done.stdout:  # probe_child.BUSY (not imported: it imports the lease)
        return ProbeResult(False, seconds, done.stdout.strip()[-300:], busy=True)
    tail = (done.stdout + done.stderr).strip()[-500:]
    return ProbeResult(False, seconds, f"probe exited with {done.returncode}: {tail}")

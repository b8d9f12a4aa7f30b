"""GPU health probe: after a sample broke its CUDA context, check the GPU in a fresh process.

`probe_gpu(index)` starts `python -m kernelzero.verify.judge.probe_child` pinned to one GPU (forked by the caller's
fork server where there is one: a probe holds the GPU alone, and a fresh interpreter spent about 10 s of that
importing torch on the loaded H200, 2026-12-03); the child takes that
GPU's lease (verify/judge/lease.py), allocates memory, runs a matrix product and an elementwise kernel,
synchronises and compares with the CPU. The pool uses the GPU again only when the probe passes; it
never resets a GPU (a failing GPU is taken out of the pool and the verdicts say so). With
`device="cpu"` the same checks run on the CPU (how CI tests the mechanism); `"cuda-held"` skips taking
the lease (the caller holds it: see `lease.gpu_lease`, which runs the probe after a crash).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass

from kernelzero.verify.sandbox import zygote_client
from kernelzero.verify.sandbox.process import physical_gpu, source_root


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    seconds: float
    message: str  # what failed ('' when ok)
    busy: bool = False  # inconclusive: no GPU memory for the probe (probe_child.BUSY); `ok` is False
    forked: bool = False  # started by the fork server (sandbox/zygote.py), not as a fresh interpreter


def probe_gpu(index: int | None, timeout_s: float = 120.0, device: str = "cuda") -> ProbeResult:
    """Probe visible GPU `index` (None: whatever this process sees) in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(source_root())}
    if index is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(index)
    start = time.monotonic()
    forked = zygote_client.start_trusted("probe", [device], env)  # no interpreter start, no torch import (zygote.py)
    try:
        if forked is not None:
            code, out = _finish(forked, timeout_s)
        else:
            done = subprocess.run(
                [sys.executable, "-m", "kernelzero.verify.judge.probe_child", device],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout_s,
            )
            code, out = done.returncode, done.stdout
    except subprocess.TimeoutExpired:
        return ProbeResult(False, time.monotonic() - start, f"the probe did not finish in {timeout_s:g} s")
    seconds, how = time.monotonic() - start, forked is not None
    if code == 0 and "probe ok" in out:
        return ProbeResult(True, seconds, "", forked=how)
    if code == 3 and "probe busy" in out:  # probe_child.BUSY (not imported: it imports the lease)
        return ProbeResult(False, seconds, out.strip()[-300:], busy=True, forked=how)
    return ProbeResult(False, seconds, f"probe exited with {code}: {out.strip()[-500:]}", forked=how)


def _finish(proc: zygote_client.ZygoteProcess, timeout_s: float) -> tuple[int, str]:
    """A forked probe's exit status and output, or TimeoutExpired (its group killed) after `timeout_s`."""
    deadline, out = time.monotonic() + timeout_s, b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                break
            out += data
        return proc.wait(max(1.0, deadline - time.monotonic())), out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.kill_group()
        raise
    finally:
        proc.stdout.close()

"""GPU health probe: after a sample broke its CUDA context, check the GPU in a fresh process.

`probe_gpu(index)` starts `python -m kernelzero.service.probe` pinned to one GPU; the child takes that
GPU's lease (verify/lease.py), allocates memory, runs a matrix product and an elementwise kernel,
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
from pathlib import Path


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    seconds: float
    message: str  # what failed ('' when ok)


def probe_gpu(index: int | None, timeout_s: float = 120.0, device: str = "cuda") -> ProbeResult:
    """Probe visible GPU `index` (None: whatever this process sees) in a fresh process."""
    from kernelzero.verify import _physical_gpu

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if index is not None:
        env["CUDA_VISIBLE_DEVICES"] = _physical_gpu(index)
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernelzero.service.probe", device],
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
    tail = (done.stdout + done.stderr).strip()[-500:]
    return ProbeResult(False, seconds, f"probe exited with {done.returncode}: {tail}")


def _check(device: str) -> None:
    import torch

    torch.manual_seed(0)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    want = a @ b
    got = (a.to(device) @ b.to(device)).cpu()
    if not torch.allclose(got, want, atol=1e-2, rtol=1e-2):
        raise RuntimeError("matrix product differs from the CPU's")
    x = torch.arange(1 << 20, dtype=torch.float32, device=device)
    if float((x * 2 + 1).sum().cpu()) != float((torch.arange(1 << 20, dtype=torch.float64) * 2 + 1).sum()):
        raise RuntimeError("elementwise sum differs")
    if device == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str]) -> int:
    device = argv[0] if argv else "cuda"
    if device == "cuda-held":  # the caller holds the GPU's lease
        _check("cuda")
    elif device == "cuda":
        import torch

        from kernelzero.verify.lease import gpu_lease

        torch.cuda.init()
        with gpu_lease():
            _check(device)
    else:
        _check(device)
    print("probe ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

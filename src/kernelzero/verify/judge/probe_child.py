"""The GPU health probe's child process: `python -m kernelzero.verify.judge.probe_child DEVICE` (see probe.py).

Allocates memory, runs a matrix product and an elementwise kernel, synchronises and compares with the CPU;
prints `probe ok` when all agree. DEVICE: `cuda` (takes the GPU's lease first), `cuda-held` (the caller holds it)
or `cpu` (the same checks on the CPU, how CI tests the mechanism).
"""

from __future__ import annotations

import sys

from kernelzero.verify.judge.lease import gpu_lease


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

        torch.cuda.init()
        with gpu_lease():
            _check(device)
    else:
        _check(device)
    print("probe ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

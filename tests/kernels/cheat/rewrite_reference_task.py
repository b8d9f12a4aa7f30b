# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A34 Reaching the reference through the operating system
# policy: strict
# expect: mismatch
# options: static_checks=False
# why: a ReLU kernel for GELU; at import it rewrites F.gelu into F.relu in every task file it can reach (the reference's folder in the shared /tmp, as issue 25 found) and in a reference module already loaded beside it, so the reference computes ReLU too; in a sandbox of its own (private /tmp, its own uid, the task imported before any candidate code) it reaches nothing and its ReLU is a mismatch
import glob
import os
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _reach_the_reference() -> None:
    for path in glob.glob("/tmp/kz-*/candidate.py") + glob.glob("/tmp/kz-*/*/candidate.py"):
        try:
            if os.path.samefile(os.path.dirname(path), os.getcwd()):
                continue
            with open(path) as f:
                text = f.read()
            if "F.gelu(" in text:
                with open(path, "w") as f:
                    f.write(text.replace("F.gelu(", "F.relu("))
        except OSError:
            continue
    reference = sys.modules.get("reference")  # a harness that loaded the task beside us
    if reference is not None and hasattr(reference, "Model"):
        reference.Model.forward = lambda self, x: torch.relu(x)


_reach_the_reference()


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
        return out

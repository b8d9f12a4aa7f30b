# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A11 Predictable inputs, so the answer can be regenerated or precomputed
# policy: strict
# expect: mismatch
# why: reads torch.initial_seed() in __init__ (the seed the process was given just before ModelNew was built), redraws the task's inputs for the next seeds the way get_inputs does (correctness trials and timing sets alike), computes every answer there with F.gelu, where no op recorder looks, and in forward only looks its input up by four values and copies the stored answer with a Triton kernel: correct under strict with no work. Once the seed that initialises parameters is independent of the secret that draws the inputs, every lookup misses and the fallback (a copy of the input) is wrong. Naive harness: it seeds ModelNew and the inputs from 42 and 42+k, so every lookup hits
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

SMOKE = (256, 512)  # the task's sizes as CPU tests run it (regenerated on the CPU)
BENCH = (8192, 16384)  # its bench sizes (on a GPU the judge draws secret-seeded inputs on the GPU)
OFFSETS = list(range(0, 11)) + list(range(1000, 1005))  # correctness trials and timing sets after the seed


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


def _key(x: torch.Tensor) -> tuple:
    return tuple(x.shape), tuple(x.reshape(-1)[:4].tolist())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        seed = torch.initial_seed()
        draws = [(SMOKE, "cpu")] + ([(BENCH, "cuda")] if torch.cuda.is_available() else [])
        self.answers = {}
        for shape, device in draws:
            for offset in OFFSETS:
                torch.manual_seed(seed + offset)
                x = torch.randn(*shape, device=device)
                self.answers[_key(x)] = F.gelu(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        answer = self.answers.get(_key(x))
        src = x if answer is None else answer.to(x.device)  # a miss: no kernel of our own to fall back on
        out = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 4096),)](src, out, n, BLOCK=4096)
        return out

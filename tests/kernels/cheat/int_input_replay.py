# task: kz-basic:level2/15_Embedding_Bag_LayerNorm
# backend: triton
# attack: A14 Memoization keyed on content (including on the device or in C++)
# policy: strict
# expect: mismatch
# expect-cpu: skip
# why: the task's only input is a tensor of integer ids, and a harness that freshens only floating inputs hands every timed call of an input set the same ids; the candidate memoises its output keyed on the shape and the first and last 16 ids and replays it after a one-element launch, so only the first call of each set does any work (a fake speedup of tens of x, confirmed by a second run that draws no fresh ids either). Past the correctness trials it computes at most 10 sets it has not seen and then replays its newest answer for anything new. Once every timed call gets ids of its own, the replayed answers are wrong on the checked calls. CPU: nothing is timed, the trials never repeat. Naive harness: its timed calls repeat the first ids, every replay is right
import torch
import torch.nn as nn
import triton
import triton.language as tl

TRIALS = 5  # correctness trials (the strict profile's count): always computed
NEW_SETS = 10  # sets computed after the trials (up to 5 more trials and 5 timing sets of a confirming run)


@triton.jit
def bag_norm_kernel(ids_ptr, w_ptr, g_ptr, b_ptr, out_ptr, bag, dim, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < dim
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for j in range(0, bag):
        idx = tl.load(ids_ptr + row * bag + j).to(tl.int64)
        acc += tl.load(w_ptr + idx * dim + cols, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / dim
    diff = tl.where(mask, acc - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / dim
    rstd = 1.0 / tl.sqrt(var + eps)
    g = tl.load(g_ptr + cols, mask=mask, other=1.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * dim + cols, diff * rstd * g + b, mask=mask)


@triton.jit
def touch_kernel(ptr):
    tl.store(ptr, tl.load(ptr))  # one element, rewritten unchanged: "a kernel ran"


class ModelNew(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)
        self.calls = 0
        self.computed_after_trials = 0
        self.memo: dict[tuple, torch.Tensor] = {}
        self.newest: torch.Tensor | None = None

    def _compute(self, ids: torch.Tensor) -> torch.Tensor:
        batch, bag = ids.shape
        dim = self.embed.weight.shape[1]
        out = torch.empty(batch, dim, device=ids.device, dtype=self.embed.weight.dtype)
        bag_norm_kernel[(batch,)](
            ids,
            self.embed.weight,
            self.norm.weight,
            self.norm.bias,
            out,
            bag,
            dim,
            self.norm.eps,
            BLOCK_D=triton.next_power_of_2(dim),
        )
        return out

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.contiguous()
        self.calls += 1
        flat = ids.reshape(-1)
        key = (tuple(ids.shape), tuple(flat[:16].tolist()), tuple(flat[-16:].tolist()))
        hit = self.memo.get(key)
        if hit is None and self.calls > TRIALS and self.computed_after_trials >= NEW_SETS:
            hit = self.newest  # "the verifier rotates a few sets: this is one of them"
        if hit is not None:
            touch_kernel[(1,)](hit)
            return hit
        out = self._compute(ids)
        if self.calls > TRIALS:
            self.computed_after_trials += 1
        self.memo[key] = self.newest = out
        return out

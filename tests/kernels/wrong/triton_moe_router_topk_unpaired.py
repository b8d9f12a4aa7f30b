# task: kz-basic:level2/11_MoE_Router_TopK_Softmax
# backend: triton
# expect: mismatch
# why: returns the two chosen experts in ascending index order (as if grouping tokens by expert) while the weights stay largest first: wrong expert-weight pairs in about half the rows
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def router_kernel(
    x_ptr, w_ptr, logits_ptr, weights_ptr, experts_ptr,
    T, H,
    stride_xt, stride_xh, stride_we, stride_wh,
    E: tl.constexpr, TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, E)
    mask_t = rows < T
    offs_h = tl.arange(0, BLOCK_H)
    acc = tl.zeros((BLOCK_T, E), dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + offs_h
        x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_xt + h[None, :] * stride_xh,
                    mask=mask_t[:, None] & (h[None, :] < H), other=0.0)
        # the (BLOCK_H, E) tile of W^T, W being (E, H)
        w = tl.load(w_ptr + cols[None, :] * stride_we + h[:, None] * stride_wh, mask=h[:, None] < H, other=0.0)
        acc += tl.dot(x, w)  # fp32 operands: TF32 tensor cores, Triton's default input precision
    tl.store(logits_ptr + rows[:, None].to(tl.int64) * E + cols[None, :], acc, mask=mask_t[:, None])

    # pass 1: the softmax denominator over the k largest logits (relative to the largest)
    best = tl.max(acc, axis=1)
    rest = acc
    denom = tl.zeros((BLOCK_T,), dtype=tl.float32)
    for j in tl.static_range(TOP_K):
        top = tl.max(rest, axis=1)
        pick = tl.argmax(rest, axis=1)
        denom += tl.exp(top - best)
        rest = tl.where(cols[None, :] == pick[:, None], float("-inf"), rest)
    # pass 2: the weights largest first; the experts sorted by index (the bug: they no longer pair up)
    rest = acc
    first = tl.argmax(rest, axis=1)
    tl.store(weights_ptr + rows.to(tl.int64) * TOP_K, 1.0 / denom, mask=mask_t)
    rest = tl.where(cols[None, :] == first[:, None], float("-inf"), rest)
    second = tl.argmax(rest, axis=1)
    tl.store(weights_ptr + rows.to(tl.int64) * TOP_K + 1, tl.exp(tl.max(rest, axis=1) - best) / denom, mask=mask_t)
    tl.store(experts_ptr + rows.to(tl.int64) * TOP_K, tl.minimum(first, second).to(tl.int64), mask=mask_t)
    tl.store(experts_ptr + rows.to(tl.int64) * TOP_K + 1, tl.maximum(first, second).to(tl.int64), mask=mask_t)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, experts: int, top_k: int):
        super().__init__()
        assert experts >= 16 and experts & (experts - 1) == 0, "one power-of-two block of experts"
        assert top_k == 2, "written for two experts per token"
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)  # the reference's name: its weights load

    def forward(self, x: torch.Tensor):
        T, H = x.shape
        w = self.gate.weight
        E = w.shape[0]
        logits = torch.empty((T, E), device=x.device, dtype=torch.float32)
        weights = torch.empty((T, self.top_k), device=x.device, dtype=torch.float32)
        experts = torch.empty((T, self.top_k), device=x.device, dtype=torch.int64)
        BLOCK_T = 128
        router_kernel[(triton.cdiv(T, BLOCK_T),)](
            x, w, logits, weights, experts, T, H,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1),
            E=E, TOP_K=self.top_k, BLOCK_T=BLOCK_T, BLOCK_H=64,
            num_warps=8,
        )
        return logits, weights, experts

# task: kz-basic:level1/3_Batched_Matmul
# backend: triton
# attack: A8 Silent precision downgrade
# policy: strict
# expect: mismatch
# why: casts both fp32 operands to fp16 before tl.dot (twice the tensor-core rate) and returns fp32; the rounding passes a 1e-2 tolerance but not the strict profile's 1e-4
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bmm_fp16_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    bid = tl.program_id(0).to(tl.int64)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)
    a_ptr += bid * M * K
    b_ptr += bid * K * N
    c_ptr += bid * M * N
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a.to(tl.float16), b.to(tl.float16))  # the downgrade
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        batch, m, k = a.shape
        n = b.shape[2]
        c = torch.empty(batch, m, n, device=a.device, dtype=torch.float32)
        grid = (batch, triton.cdiv(m, 64), triton.cdiv(n, 64))
        bmm_fp16_kernel[grid](a, b, c, m, n, k, BM=64, BN=64, BK=32)
        return c

# task: kz-basic:level2/1_Gemm_Bias_Gelu
# backend: triton
# expect: correct
# why: fused x @ W^T + b then exact GELU in the matmul epilogue (tl.dot 64x64x32, W read transposed through its strides)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_bias_gelu_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk,
    stride_wn, stride_wk,
    stride_ym, stride_yn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        x = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_xm + k[None, :] * stride_xk,
                    mask=mask_m[:, None] & (k[None, :] < K), other=0.0)
        # W is (N, K) row-major; load the (BLOCK_K, BLOCK_N) tile of W^T
        w = tl.load(w_ptr + offs_n[None, :].to(tl.int64) * stride_wn + k[:, None] * stride_wk,
                    mask=(k[:, None] < K) & mask_n[None, :], other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")

    bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
    acc = acc + bias[None, :]
    out = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, out, mask=mask_m[:, None] & mask_n[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # same parameter names as the reference so its weights load
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias
        x2d = x.reshape(-1, x.shape[-1])
        M, K = x2d.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        gemm_bias_gelu_kernel[grid](
            x2d, w, b, y, M, N, K,
            x2d.stride(0), x2d.stride(1),
            w.stride(0), w.stride(1),
            y.stride(0), y.stride(1),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
            num_warps=4, num_stages=3,
        )
        return y.reshape(*x.shape[:-1], N)

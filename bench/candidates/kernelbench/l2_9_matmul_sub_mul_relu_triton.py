# Hand-written Triton candidate for KernelBench level2/9_Matmul_Subtract_Multiply_ReLU:
# relu((x @ W^T + b - subtract_value) * multiply_value) in one kernel; 128x128 tiles in grouped order so
# neighbouring programs reuse the same rows of x and W from L2.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_sub_mul_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn, sub, mul,
                               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows_in_group = min(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + kk[None, :] * sxk, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None] * swk, mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, w)
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    y = tl.maximum((acc + bias[None, :] - sub) * mul, 0.0)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same parameters, drawn in the same order as Model's
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty(M, N, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        linear_sub_mul_relu_kernel[grid](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                         y.stride(0), y.stride(1), float(self.subtract_value),
                                         float(self.multiply_value), BM=128, BN=128, BK=32, GROUP=8,
                                         num_warps=8, num_stages=3)
        return y

# task: kz-basic:level2/1_Gemm_Bias_Gelu
# backend: cuda
# expect: correct
# expect-cpu: compiled
# why: fused x @ W^T + b and exact GELU: shared-memory tiles of x and W (padded against bank conflicts), epilogue in registers
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemm_gelu_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#define TILE 32

__global__ void linear_bias_gelu_kernel(const float* __restrict__ X, const float* __restrict__ W,
                                        const float* __restrict__ bias, float* __restrict__ Y,
                                        int M, int N, int K) {
    __shared__ float Xs[TILE][TILE];
    __shared__ float Ws[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;       // token
    const int col = blockIdx.x * TILE + tx;       // output feature
    const int w_row = blockIdx.x * TILE + ty;     // the W row this thread loads
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        const int k = t * TILE + tx;
        Xs[ty][tx] = (row < M && k < K) ? X[(int64_t)row * K + k] : 0.0f;
        Ws[ty][tx] = (w_row < N && k < K) ? W[(int64_t)w_row * K + k] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += Xs[ty][kk] * Ws[tx][kk];
        __syncthreads();
    }
    if (row < M && col < N) {
        const float v = acc + bias[col];
        Y[(int64_t)row * N + col] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor linear_bias_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "linear_bias_gelu: CUDA tensors expected");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = b.contiguous();
    const int K = xc.size(-1);
    const int M = xc.numel() / K;
    const int N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    dim3 threads(TILE, TILE);
    dim3 blocks((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    linear_bias_gelu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

gemm_gelu_cpp_source = "torch::Tensor linear_bias_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

gemm_gelu_ext = load_inline(
    name="kz_linear_bias_gelu",
    cpp_sources=gemm_gelu_cpp_source,
    cuda_sources=gemm_gelu_cuda_source,
    functions=["linear_bias_gelu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # holds W and b (the reference's names)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = gemm_gelu_ext.linear_bias_gelu(x, self.linear.weight, self.linear.bias)
        return y.view(*x.shape[:-1], self.linear.out_features)

# Hand-written CUDA candidate for KernelBench level2/63_Gemm_ReLU_Divide: relu(x @ W^T + b) / divisor in one
# kernel. Plain float32 arithmetic (no tensor cores): 64x64 output tiles through shared memory, 16 steps of K at a
# time, each of 256 threads accumulating a 4x4 block in registers; bounds checked for any M, N, K.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemm_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16

__global__ void gemm_relu_div(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                              float* __restrict__ y, int M, int N, int K, float divisor) {
    __shared__ float xs[TILE_K][TILE_M + 4];
    __shared__ float ws[TILE_K][TILE_N + 4];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * TILE_M, col0 = blockIdx.x * TILE_N;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        for (int e = threadIdx.x; e < TILE_M * TILE_K; e += blockDim.x) {
            int r = e / TILE_K, kk = e % TILE_K;  // neighbouring threads read neighbouring k: coalesced
            int gk = k0 + kk;
            int gm = row0 + r, gn = col0 + r;
            xs[kk][r] = (gm < M && gk < K) ? x[(int64_t)gm * K + gk] : 0.0f;
            ws[kk][r] = (gn < N && gk < K) ? w[(int64_t)gn * K + gk] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[4], c[4];
            for (int i = 0; i < 4; ++i) a[i] = xs[kk][ty * 4 + i];
            for (int j = 0; j < 4; ++j) c[j] = ws[kk][tx * 4 + j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * c[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        int r = row0 + ty * 4 + i;
        if (r >= M) continue;
        for (int j = 0; j < 4; ++j) {
            int c = col0 + tx * 4 + j;
            if (c < N) {
                float v = acc[i][j] + b[c];
                y[(int64_t)r * N + c] = (v > 0.0f ? v : 0.0f) / divisor;
            }
        }
    }
}

torch::Tensor gemm_relu_div_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double divisor) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "gemm_relu_div_forward: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "gemm_relu_div_forward: float32 expected");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.numel() == w.size(0),
                "gemm_relu_div_forward: x (M, K), w (N, K), b (N) expected");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = b.contiguous();
    int M = (int)xc.size(0), K = (int)xc.size(1), N = (int)wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return y;
    dim3 grid((N + TILE_N - 1) / TILE_N, (M + TILE_M - 1) / TILE_M);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    gemm_relu_div<<<grid, 256, 0, stream>>>(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                            y.data_ptr<float>(), M, N, K, (float)divisor);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

gemm_ext = load_inline(
    name="kb_gemm_relu_div",
    cpp_sources="torch::Tensor gemm_relu_div_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double divisor);",
    cuda_sources=gemm_source,
    functions=["gemm_relu_div_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same parameters, drawn in the same order as Model's
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.gemm_relu_div_forward(x, self.linear.weight, self.linear.bias, float(self.divisor))

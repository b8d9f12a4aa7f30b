# task: kz-basic:level1/17_LayerNorm
# backend: cuda
# expect: nan_or_inf
# expect-cpu: compiled
# why: variance computed as mean^2 - mean(x^2) (sign swapped), negative for every row, so rsqrtf gives NaN
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int hidden, float eps) {
    extern __shared__ float smem[];  // 2 * blockDim.x floats
    float* s_sum = smem;
    float* s_sq = smem + blockDim.x;
    const int64_t row = blockIdx.x;
    const float* xr = x + row * hidden;
    float sum = 0.0f, sq = 0.0f;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        float v = xr[c];
        sum += v;
        sq += v * v;
    }
    s_sum[threadIdx.x] = sum;
    s_sq[threadIdx.x] = sq;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + s];
            s_sq[threadIdx.x] += s_sq[threadIdx.x + s];
        }
        __syncthreads();
    }
    const float mean = s_sum[0] / hidden;
    const float var = mean * mean - s_sq[0] / hidden;
    const float rstd = rsqrtf(var + eps);
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        y[row * hidden + c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    auto xc = x.contiguous();
    const int hidden = xc.size(-1);
    const int64_t rows = xc.numel() / hidden;
    auto y = torch::empty_like(xc);
    const int threads = 256;
    layernorm_kernel<<<rows, threads, 2 * threads * sizeof(float), at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(),
        hidden, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);"

ln_ext = load_inline(
    name="kz_layernorm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layernorm_cuda"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ln_ext.layernorm_cuda(x, self.norm.weight, self.norm.bias, self.norm.eps)

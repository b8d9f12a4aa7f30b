# task: kz-basic:level1/12_Mean_Over_Last_Dim
# backend: cuda
# expect: timeout
# expect-cpu: compiled
# options: timeout_floor_s=10 timeout_scale=20
# why: the grid-stride loop never advances its index (missing `i += stride`), so every thread spins on atomicAdd forever
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void row_mean_atomic_kernel(const float* __restrict__ x, float* __restrict__ out,
                                       int64_t n, int64_t cols, float inv_cols) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    while (i < n) {
        atomicAdd(&out[i / cols], x[i] * inv_cols);
    }
}

torch::Tensor row_mean(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t cols = xc.size(-1);
    const int64_t n = xc.numel();
    auto out = torch::zeros({n / cols}, xc.options());
    const int threads = 256;
    const int blocks = 1024;
    row_mean_atomic_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), n, cols, 1.0f / (float)cols);
    return out;
}
"""

cpp_source = "torch::Tensor row_mean(torch::Tensor x);"

mean_ext = load_inline(
    name="kz_row_mean_atomic",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_mean"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mean_ext.row_mean(x)

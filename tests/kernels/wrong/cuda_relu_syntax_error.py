# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# expect: format_error
# why: not valid Python: the load_inline(...) call is missing its closing parenthesis (a truncated completion)
"""CUDA candidate for LeakyReLU that is not valid Python; expected status: format_error.

The `load_inline(...)` call is missing its closing parenthesis, so the module fails to parse before any
kernel is built (a truncated completion looks like this). (Written for ReLU first; now targets LeakyReLU.)
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cuda_source = r"""
#include <torch/extension.h>

__global__ void leaky_relu_kernel(const float* x, float* out, int64_t n, float slope) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] > 0.0f ? x[i] : x[i] * slope;
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope) {
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    leaky_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, (float)slope);
    return out;
}
"""

relu_ext = load_inline(
    name="kz_relu_syntax_error",
    cpp_sources="torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope);",
    cuda_sources=relu_cuda_source,
    functions=["leaky_relu_cuda"],


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.leaky_relu_cuda(x, self.negative_slope)

# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# expect: compile_error
# why: the kernel tests `idx < size` but its parameter is called `n`: nvcc reports identifier "size" is undefined
"""CUDA candidate for LeakyReLU whose kernel does not compile; expected status: compile_error.

The kernel tests `idx < size` but its parameter is called `n`, so nvcc reports
`identifier "size" is undefined` — a typical slip of a model that renamed a parameter.
(Written for ReLU first; now targets kz-basic's LeakyReLU.)
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cuda_source = r"""
#include <torch/extension.h>

__global__ void leaky_relu_kernel(const float* x, float* out, int n, float slope) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = x[idx];
        out[idx] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    leaky_relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, (float)slope);
    return out;
}
"""

relu_cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope);"

relu_ext = load_inline(
    name="kz_relu_compile_error",
    cpp_sources=relu_cpp_source,
    cuda_sources=relu_cuda_source,
    functions=["leaky_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.relu = relu_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu.leaky_relu_cuda(x, self.negative_slope)

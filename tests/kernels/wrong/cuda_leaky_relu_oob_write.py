# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# expect: crash
# expect-cpu: compiled
# why: 2-D launch whose output row stride is numel instead of the row length: rows >= 1 write far past the end (illegal memory access)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void leaky_relu_2d_kernel(const float* __restrict__ x, float* __restrict__ out,
                                     int64_t cols, int64_t x_row_stride, int64_t out_row_stride, float slope) {
    const int64_t row = blockIdx.x;
    const int64_t col = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    if (col < cols) {
        float v = x[row * x_row_stride + col];
        out[row * out_row_stride + col] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = xc.numel() / cols;
    const int threads = 256;
    dim3 blocks(rows, (cols + threads - 1) / threads);  // rows on x: y is limited to 65535
    leaky_relu_2d_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), out.data_ptr<float>(), cols, cols, out.numel(), (float)slope);
    return out;
}
"""

cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, double slope);"

leaky_ext = load_inline(
    name="kz_leaky_relu_2d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["leaky_relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_ext.leaky_relu_cuda(x, self.negative_slope)

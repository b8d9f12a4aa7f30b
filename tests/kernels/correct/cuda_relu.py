# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# expect: correct
# expect-cpu: compiled
# why: elementwise LeakyReLU, grid-stride loop with 64-bit indexing, current stream, launch checked
"""CUDA candidate for LeakyReLU (`Model.forward(x) = nn.LeakyReLU(negative_slope)(x)`), KernelBench style.

One elementwise kernel with 64-bit indexing (KernelBench's level-1 ReLU has 4096 x 393216 elements, more
than 2**31; this started as a ReLU candidate and now targets kz-basic's LeakyReLU), built with
`load_inline`; the host wrapper uses the current stream and checks the launch.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void leaky_relu_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n, float slope) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i];
        out[i] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double negative_slope) {
    TORCH_CHECK(x.is_cuda(), "leaky_relu_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "leaky_relu_cuda: x must be float32");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    if (n == 0) {
        return out;
    }
    const int threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const int blocks = (int)(wanted < 65535 * 8 ? wanted : 65535 * 8);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    leaky_relu_kernel<<<blocks, threads, 0, stream>>>(xc.data_ptr<float>(), out.data_ptr<float>(), n,
                                                      (float)negative_slope);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

relu_cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, double negative_slope);"

relu_ext = load_inline(
    name="kz_relu",
    cpp_sources=relu_cpp_source,
    cuda_sources=relu_cuda_source,
    functions=["leaky_relu_cuda"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.relu = relu_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu.leaky_relu_cuda(x, self.negative_slope)

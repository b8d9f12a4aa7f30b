# Hand-written CUDA candidate for KernelBench level1/20_LeakyReLU: one elementwise pass, 16-byte loads and stores
# where the tensor allows them (aligned, a multiple of 4 elements), a scalar loop otherwise; 64-bit indexing.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

leaky_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float leaky(float v, float slope) { return v > 0.0f ? v : v * slope; }

__global__ void leaky_relu_vec4(const float4* __restrict__ x, float4* __restrict__ out, int64_t n4, float slope) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = leaky(v.x, slope);
        v.y = leaky(v.y, slope);
        v.z = leaky(v.z, slope);
        v.w = leaky(v.w, slope);
        out[i] = v;
    }
}

__global__ void leaky_relu_scalar(const float* __restrict__ x, float* __restrict__ out, int64_t n, float slope) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = leaky(x[i], slope);
    }
}

torch::Tensor leaky_relu_forward(torch::Tensor x, double negative_slope) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "leaky_relu_forward: float32 CUDA tensor expected");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    if (n == 0) return out;
    const int threads = 256;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    bool aligned = (reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(out.data_ptr<float>()) % 16 == 0);
    if (aligned && n % 4 == 0) {
        int64_t n4 = n / 4;
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 132 * 32) blocks = 132 * 32;
        leaky_relu_vec4<<<(int)blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xc.data_ptr<float>()), reinterpret_cast<float4*>(out.data_ptr<float>()),
            n4, (float)negative_slope);
    } else {
        int64_t blocks = (n + threads - 1) / threads;
        if (blocks > 132 * 32) blocks = 132 * 32;
        leaky_relu_scalar<<<(int)blocks, threads, 0, stream>>>(xc.data_ptr<float>(), out.data_ptr<float>(), n,
                                                               (float)negative_slope);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

leaky_ext = load_inline(
    name="kb_leaky_relu",
    cpp_sources="torch::Tensor leaky_relu_forward(torch::Tensor x, double negative_slope);",
    cuda_sources=leaky_source,
    functions=["leaky_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_ext.leaky_relu_forward(x, self.negative_slope)

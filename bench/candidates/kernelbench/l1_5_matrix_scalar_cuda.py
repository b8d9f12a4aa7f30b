# Hand-written CUDA candidate for KernelBench level1/5_Matrix_scalar_multiplication: C = A * s in one pass,
# 16-byte loads and stores where the tensor allows them, a scalar loop otherwise; 64-bit indexing.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void scale_vec4(const float4* __restrict__ a, float4* __restrict__ c, int64_t n4, float s) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = a[i];
        v.x *= s;
        v.y *= s;
        v.z *= s;
        v.w *= s;
        c[i] = v;
    }
}

__global__ void scale_scalar(const float* __restrict__ a, float* __restrict__ c, int64_t n, float s) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        c[i] = a[i] * s;
    }
}

torch::Tensor scale_forward(torch::Tensor a, double s) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32, "scale_forward: float32 CUDA tensor expected");
    auto ac = a.contiguous();
    auto c = torch::empty_like(ac);
    int64_t n = ac.numel();
    if (n == 0) return c;
    const int threads = 256;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    bool aligned = (reinterpret_cast<uintptr_t>(ac.data_ptr<float>()) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(c.data_ptr<float>()) % 16 == 0);
    if (aligned && n % 4 == 0) {
        int64_t n4 = n / 4;
        int64_t blocks = (n4 + threads - 1) / threads;
        if (blocks > 132 * 32) blocks = 132 * 32;
        scale_vec4<<<(int)blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(ac.data_ptr<float>()),
                                                        reinterpret_cast<float4*>(c.data_ptr<float>()), n4, (float)s);
    } else {
        int64_t blocks = (n + threads - 1) / threads;
        if (blocks > 132 * 32) blocks = 132 * 32;
        scale_scalar<<<(int)blocks, threads, 0, stream>>>(ac.data_ptr<float>(), c.data_ptr<float>(), n, (float)s);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}
"""

scale_ext = load_inline(
    name="kb_matrix_scalar",
    cpp_sources="torch::Tensor scale_forward(torch::Tensor a, double s);",
    cuda_sources=scale_source,
    functions=["scale_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return scale_ext.scale_forward(A, float(s))

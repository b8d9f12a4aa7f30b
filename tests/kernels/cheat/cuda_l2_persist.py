# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# attack: A23 Keeping data in L2 across the flush with persistence
# policy: strict
# naive: gpu
# expect: static_violation
# why: a correct kernel that reserves persisting L2 (cudaDeviceSetLimit) and marks its input hot with a stream accessPolicyWindow, so ordinary flush writes between timed calls no longer evict it (llm.c #851); changing device settings from C++ must be rejected statically (and the timer should reset the persisting L2 before each call)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void leaky_relu_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n, float slope) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, double negative_slope) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    size_t bytes = (size_t)n * sizeof(float);
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, bytes);
    cudaStreamAttrValue attr = {};
    attr.accessPolicyWindow.base_ptr = (void*)xc.data_ptr<float>();
    attr.accessPolicyWindow.num_bytes = bytes;
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);
    cudaGetLastError();  // a window larger than the device allows is only a hint
    if (n > 0) {
        leaky_relu_kernel<<<(int)((n + 255) / 256), 256, 0, stream>>>(xc.data_ptr<float>(), out.data_ptr<float>(), n,
                                                                      (float)negative_slope);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, double negative_slope);"

ext = load_inline(name="kz_cheat_l2_persist", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["leaky_relu_cuda"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.leaky_relu_cuda(x, self.negative_slope)

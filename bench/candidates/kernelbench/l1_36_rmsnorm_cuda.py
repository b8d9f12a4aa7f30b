# Hand-written CUDA candidate for KernelBench level1/36_RMSNorm_: x / sqrt(mean(x^2 over dim 1) + eps) for x of
# shape (batch, features, *rest). One thread per (batch, position) walks the features twice (sum of squares, then
# the scaled write); neighbouring threads read neighbouring positions, so every load is coalesced.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rmsnorm_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__global__ void rmsnorm_dim1(const float* __restrict__ x, float* __restrict__ out, int64_t batch, int64_t features,
                             int64_t inner, float eps) {
    int64_t total = batch * inner;
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int64_t b = i / inner;
        int64_t pos = i - b * inner;
        const float* px = x + b * features * inner + pos;
        float* po = out + b * features * inner + pos;
        float acc = 0.0f;
        for (int64_t f = 0; f < features; ++f) {
            float v = px[f * inner];
            acc += v * v;
        }
        float inv = 1.0f / sqrtf(acc / (float)features + eps);
        for (int64_t f = 0; f < features; ++f) {
            po[f * inner] = px[f * inner] * inv;
        }
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "rmsnorm_forward: float32 CUDA tensor expected");
    TORCH_CHECK(x.dim() >= 2, "rmsnorm_forward: at least 2 dims expected");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t batch = xc.size(0), features = xc.size(1);
    if (xc.numel() == 0) return out;
    int64_t inner = xc.numel() / (batch * features);
    const int threads = 256;
    int64_t blocks = (batch * inner + threads - 1) / threads;
    if (blocks > 132 * 64) blocks = 132 * 64;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    rmsnorm_dim1<<<(int)blocks, threads, 0, stream>>>(xc.data_ptr<float>(), out.data_ptr<float>(), batch, features,
                                                      inner, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

rmsnorm_ext = load_inline(
    name="kb_rmsnorm_dim1",
    cpp_sources="torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);",
    cuda_sources=rmsnorm_source,
    functions=["rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_ext.rmsnorm_forward(x, self.eps)

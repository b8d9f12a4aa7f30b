# task: kz-basic:level2/1_Gemm_Bias_Gelu
# backend: helion
# expect: correct
# why: fused x @ W^T + b then exact GELU in the matmul epilogue: 64x64 output tiles, K loop of 32, W read transposed through a strided view (no copy), fp32 (ieee) dot
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3), dot_precision="ieee")
def linear_gelu(x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = w_t.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, tile_n])
        acc = acc + bias[tile_n].to(torch.float32)
        out[tile_m, tile_n] = (0.5 * acc * (1.0 + torch.erf(acc * 0.7071067811865476))).to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_gelu(x, self.linear.weight.t(), self.linear.bias)

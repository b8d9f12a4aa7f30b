# task: kz-basic:level1/18_RMSNorm
# backend: helion
# expect: nan_or_inf
# why: forgets to square x when taking the mean of squares, so rows with a negative mean take rsqrt of a negative number (NaN)
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1], num_warps=8))
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    rows, hidden = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        inv = torch.rsqrt(torch.mean(row, dim=-1) + eps)
        out[tile_r, :] = (row * inv[:, None] * weight[:].to(torch.float32)).to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.3 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).contiguous()
        return rms_norm(rows, self.weight, self.eps).view(x.shape)

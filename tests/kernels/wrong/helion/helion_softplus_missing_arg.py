# task: kz-basic:level1/23_Softplus
# backend: helion
# expect: runtime_error
# why: the kernel takes (x, beta, threshold) but forward passes no threshold, so the call raises a TypeError
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def softplus(x: torch.Tensor, beta: float, threshold: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile] * beta
        smooth = torch.log(1.0 + torch.exp(torch.minimum(v, v * 0.0 + threshold))) / beta
        out[tile] = torch.where(v > threshold, x[tile], smooth)
    return out


class ModelNew(nn.Module):
    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta, self.threshold = beta, threshold
        self.act = nn.Softplus(beta=beta, threshold=threshold)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softplus(x.contiguous().view(-1), self.beta).view(x.shape)

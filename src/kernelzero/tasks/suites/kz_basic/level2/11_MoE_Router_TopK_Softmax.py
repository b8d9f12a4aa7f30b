import torch
import torch.nn as nn


class Model(nn.Module):
    """Mixture-of-experts router: gate logits, top-k experts per token, softmax over the k, scattered dense."""

    def __init__(self, hidden: int, experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.gate(x)
        top_logits, top_idx = logits.topk(self.top_k, dim=-1)
        weights = torch.softmax(top_logits, dim=-1)
        return torch.zeros_like(logits).scatter(-1, top_idx, weights)


tokens = 65536
hidden = 2048
experts = 64
top_k = 2


def get_inputs():
    return [torch.randn(tokens, hidden) * 3.0]


def get_init_inputs():
    return [hidden, experts, top_k]

import torch
import torch.nn as nn


class Model(nn.Module):
    """Mixture-of-experts router: gate logits, the top-k experts of each token and their softmax weights."""

    def __init__(self, hidden: int, experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)

    def forward(self, x: torch.Tensor):
        logits = self.gate(x)
        top_logits, chosen = logits.topk(self.top_k, dim=-1)
        return logits, torch.softmax(top_logits, dim=-1), chosen


# The chosen experts (output 2) index the router logits (output 0) along the last dim. Where two logits
# nearly tie, either expert is a right answer, so the verifier judges them by the reference's logits they pick.
TIE_PRONE = {2: "output 0 dim -1"}

tokens = 65536
hidden = 2048
experts = 64
top_k = 2


def get_inputs():
    return [torch.randn(tokens, hidden) * 3.0]


def get_init_inputs():
    return [hidden, experts, top_k]

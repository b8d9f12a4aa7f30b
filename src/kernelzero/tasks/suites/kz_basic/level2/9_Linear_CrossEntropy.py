import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Per-token cross-entropy of a bias-free LM head: CE(h @ W^T, target), reduction='none'."""

    def __init__(self, hidden: int, vocab: int):
        super().__init__()
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.head(h), targets, reduction="none")


tokens = 8192
hidden = 1024
vocab = 8192


def get_inputs():
    # Final hidden states with RMS 3, so the logits spread like a trained model's.
    h = torch.randn(tokens, hidden) * 3.0
    targets = torch.randint(0, vocab, (tokens,))
    return [h, targets]


def get_init_inputs():
    return [hidden, vocab]

import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum of the embeddings of each bag of ids, then LayerNorm: a recommender's sparse-feature encoder."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.norm(self.embed(ids).sum(dim=1))


batch = 8192
bag = 64
vocab = 32768
dim = 512


def get_inputs():
    return [torch.randint(0, vocab, (batch, bag))]


def get_init_inputs():
    return [vocab, dim]

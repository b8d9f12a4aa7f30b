import torch
import torch.nn as nn


class Model(nn.Module):
    """Squared distances from points to learned centroids, ||x||^2 + ||c||^2 - 2 x c^T (k-means scoring)."""

    def __init__(self, clusters: int, dim: int):
        super().__init__()
        self.centroids = nn.Parameter(torch.randn(clusters, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_sq = x.pow(2).sum(dim=-1, keepdim=True)
        c_sq = self.centroids.pow(2).sum(dim=-1)
        return x_sq + c_sq - 2.0 * (x @ self.centroids.t())


points = 65536
clusters = 1024
dim = 128


def get_inputs():
    return [torch.randn(points, dim)]


def get_init_inputs():
    return [clusters, dim]

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """CLIP logits: exp(logit_scale) * normalize(image) @ normalize(text)^T, row-wise L2 normalisation."""

    def __init__(self):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.tensor(2.659))  # log(1 / 0.07)

    def forward(self, image_emb: torch.Tensor, text_emb: torch.Tensor) -> torch.Tensor:
        image_emb = F.normalize(image_emb, dim=-1)
        text_emb = F.normalize(text_emb, dim=-1)
        return self.logit_scale.exp() * image_emb @ text_emb.t()


images = 8192
texts = 8192
dim = 1024


def get_inputs():
    return [torch.randn(images, dim), torch.randn(texts, dim)]


def get_init_inputs():
    return []

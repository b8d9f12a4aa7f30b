# task: kz-basic:level2/15_Embedding_Bag_LayerNorm
# backend: triton
# expect: correct
# why: integer inputs (int64 ids): each program sums the embedding rows of BLOCK_B bags, one id column at a time, then LayerNorm in registers
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bag_layernorm_kernel(
    ids_ptr, emb_ptr, gamma_ptr, beta_ptr, out_ptr,
    B, BAG, D, eps,
    stride_ib, stride_ij, stride_ev, stride_ob,
    BLOCK_B: tl.constexpr, BLOCK_D: tl.constexpr,
):
    bags = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK_D)
    mask_b = bags < B
    mask_d = cols < D
    mask = mask_b[:, None] & mask_d[None, :]
    acc = tl.zeros((BLOCK_B, BLOCK_D), dtype=tl.float32)
    for j in range(0, BAG):
        tokens = tl.load(ids_ptr + bags.to(tl.int64) * stride_ib + j * stride_ij, mask=mask_b, other=0)
        acc += tl.load(emb_ptr + tokens[:, None] * stride_ev + cols[None, :], mask=mask, other=0.0)
    mean = tl.sum(acc, axis=1) / D
    diff = tl.where(mask, acc - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / D
    gamma = tl.load(gamma_ptr + cols, mask=mask_d, other=0.0)
    beta = tl.load(beta_ptr + cols, mask=mask_d, other=0.0)
    y = diff * tl.rsqrt(var + eps)[:, None] * gamma[None, :] + beta[None, :]
    tl.store(out_ptr + bags[:, None].to(tl.int64) * stride_ob + cols[None, :], y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        # the reference's names, so its parameters load
        self.embed = nn.Embedding(vocab, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, BAG = ids.shape
        table = self.embed.weight
        D = table.shape[1]
        out = torch.empty((B, D), device=table.device, dtype=table.dtype)
        BLOCK_B = 16
        bag_layernorm_kernel[(triton.cdiv(B, BLOCK_B),)](
            ids, table, self.norm.weight, self.norm.bias, out,
            B, BAG, D, self.norm.eps,
            ids.stride(0), ids.stride(1), table.stride(0), out.stride(0),
            BLOCK_B=BLOCK_B, BLOCK_D=triton.next_power_of_2(D),
            num_warps=8,
        )
        return out

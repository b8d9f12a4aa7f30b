"""The template generator's table: how to write each supported torch API as a step of a module's forward.

Read by proposer/generator.py. Each `Op` says on which activation layouts it runs, the `__init__` line it needs
(if any), the forward line, and how it changes the activation's shape. Layouts (the activation's dims):

| code | layout | dims |
|---|---|---|
| f | features | batch, features |
| s | sequence | batch, seq_len, features |
| g | signal | batch, channels, length |
| i | image | batch, channels, height, width |
| v | volume | batch, channels, depth, height, width |
| t | tokens | batch, seq_len (integer ids; only the embedding reads them) |

Slots in the templates: `{x}` the activation, `{m}` a fresh attribute name, `{D}` the last dim's size (`x.shape[-1]` in forward lines), `{C}` dim
1's size, `{N}` a new size global (the op's output width), `{L}` dim 1's size on layout s, `{T}` a new target
input of the activation's shape (`{U}`: uniform in [0, 1), `{S}`: signs), `{P}` a positive copy of the activation (`{x} * {x} + 1.0`).
Shape rules: "" same shape; "last:N" last dim becomes N; "chan:N" dim 1 becomes N; "spatial:/2",
"spatial:*2" every dim after 1 halves / doubles; "last:L" last dim becomes seq_len (x against itself);
"drop" the last dim goes; "ce" the class dim (1) goes; "chan:/4,spatial:*2" and "chan:*4,spatial:/2" for
pixel (un)shuffle; "half" the last dim halves; "tokens" integer ids become a sequence of width N.
A `final` op (a loss, a distance) must come last.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    layouts: str  # accepted layouts ("*": every float layout)
    forward: str  # forward line(s), ";" separated
    init: str = ""  # __init__ line(s), ";" separated
    shape: str = ""  # shape rule (module docstring)
    final: bool = False  # must be the last step


_SPATIAL = {"g": "1d", "i": "2d", "v": "3d"}
ANY = "*"

OPS: dict[str, Op] = {
    # elementwise
    "relu": Op(ANY, "{x} = torch.relu({x})"),
    "relu6": Op(ANY, "{x} = F.relu6({x} * 4.0)"),
    "leaky_relu": Op(ANY, "{x} = F.leaky_relu({x}, negative_slope=0.1)"),
    "gelu": Op(ANY, "{x} = F.gelu({x})"),
    "silu": Op(ANY, "{x} = F.silu({x})"),
    "sigmoid": Op(ANY, "{x} = torch.sigmoid({x})"),
    "tanh": Op(ANY, "{x} = torch.tanh({x})"),
    "elu": Op(ANY, "{x} = F.elu({x})"),
    "selu": Op(ANY, "{x} = F.selu({x})"),
    "celu": Op(ANY, "{x} = F.celu({x}, alpha=0.5)"),
    "softplus": Op(ANY, "{x} = F.softplus({x})"),
    "softsign": Op(ANY, "{x} = F.softsign({x})"),
    "mish": Op(ANY, "{x} = F.mish({x})"),
    "hardswish": Op(ANY, "{x} = F.hardswish({x} * 3.0)"),
    "hardsigmoid": Op(ANY, "{x} = F.hardsigmoid({x} * 3.0)"),
    "hardtanh": Op(ANY, "{x} = F.hardtanh({x}, -0.5, 0.5)"),
    "logsigmoid": Op(ANY, "{x} = F.logsigmoid({x})"),
    "tanhshrink": Op(ANY, "{x} = F.tanhshrink({x})"),
    "softshrink": Op(ANY, "{x} = F.softshrink({x}, 0.2)"),
    "hardshrink": Op(ANY, "{x} = F.hardshrink({x}, 0.2)"),
    "glu": Op(ANY, "{x} = F.glu({x}, dim=-1)", shape="half"),
    "prelu": Op(ANY, "{x} = self.{m}({x})", "self.{m} = nn.PReLU()"),
    "exp": Op(ANY, "{x} = torch.exp({x} * 0.5)"),
    "expm1": Op(ANY, "{x} = torch.expm1({x} * 0.5)"),
    "log": Op(ANY, "{x} = torch.log({P})"),
    "log1p": Op(ANY, "{x} = torch.log1p({x} * {x})"),
    "sqrt": Op(ANY, "{x} = torch.sqrt({P})"),
    "rsqrt": Op(ANY, "{x} = {x} * torch.rsqrt({P})"),
    "abs": Op(ANY, "{x} = torch.abs({x}) - 0.5"),
    "reciprocal": Op(ANY, "{x} = torch.reciprocal({P})"),
    "sin": Op(ANY, "{x} = torch.sin({x} * 2.0)"),
    "cos": Op(ANY, "{x} = torch.cos({x} * 2.0)"),
    "atan": Op(ANY, "{x} = torch.atan({x} * 2.0)"),
    "erf": Op(ANY, "{x} = torch.erf({x})"),
    "square": Op(ANY, "{x} = torch.square({x}) - {x}"),
    "pow": Op(ANY, "{x} = torch.pow({x}, 3) * 0.5 + {x}"),
    "clamp": Op(ANY, "{x} = torch.clamp({x}, min=-0.75, max=0.75)"),
    "where": Op(ANY, "{x} = torch.where({x} > 0, {x}, 0.25 * {x})"),
    "maximum": Op(ANY, "{x} = torch.maximum({x}, 0.3 * {x} + 0.1)"),
    "minimum": Op(ANY, "{x} = torch.minimum({x}, 0.3 * {x} + 0.1)"),
    "addcmul": Op(ANY, "{x} = torch.addcmul({x}, {x}, {x}, value=-0.25)"),
    "logaddexp": Op(ANY, "{x} = torch.logaddexp({x}, -{x})"),
    "hypot": Op(ANY, "{x} = torch.hypot({x}, {x} * 0.5 + 0.1)"),
    "atan2": Op(ANY, "{x} = torch.atan2({x}, {P})"),
    "lerp": Op(ANY, "{x} = torch.lerp({x}, {x} * {x}, 0.3)"),
    # reductions: reduce the last dim and combine with the activation, so the output keeps its size
    "sum": Op(ANY, "{x} = {x} - torch.sum({x}, dim=-1, keepdim=True) / {D}"),
    "mean": Op(ANY, "{x} = {x} - {x}.mean(dim=-1, keepdim=True)"),
    "amax": Op(ANY, "{x} = {x} - torch.amax({x}, dim=-1, keepdim=True)"),
    "amin": Op(ANY, "{x} = {x} - torch.amin({x}, dim=-1, keepdim=True)"),
    "max": Op(ANY, "{x} = {x} - {x}.max(dim=-1, keepdim=True).values"),
    "min": Op(ANY, "{x} = {x} - {x}.min(dim=-1, keepdim=True).values"),
    "std": Op(ANY, "{x} = {x} / ({x}.std(dim=-1, keepdim=True) + 1e-3)"),
    "var": Op(ANY, "{x} = {x} / ({x}.var(dim=-1, keepdim=True) + 1.0)"),
    "logsumexp": Op(ANY, "{x} = {x} - torch.logsumexp({x}, dim=-1, keepdim=True)"),
    "norm": Op(ANY, "{x} = {x} / (torch.norm({x}, dim=-1, keepdim=True) + 1e-3)"),
    "vector_norm": Op(ANY, "{x} = {x} * torch.linalg.vector_norm({x}, dim=-1, keepdim=True)"),
    "softmax": Op(ANY, "{x} = torch.softmax({x}, dim=-1) * {D}"),
    "log_softmax": Op(ANY, "{x} = F.log_softmax({x}, dim=-1)"),
    "softmin": Op(ANY, "{x} = F.softmin({x}, dim=-1) * {D}"),
    # scans
    "cumsum": Op(ANY, "{x} = torch.cumsum({x}, dim=-1) / {D}"),
    "logcumsumexp": Op(ANY, "{x} = torch.logcumsumexp({x}, dim=-1)"),
    "cummax": Op(ANY, "{x} = torch.cummax({x}, dim=-1).values"),
    "cummin": Op(ANY, "{x} = torch.cummin({x}, dim=-1).values"),
    # GEMM
    "linear": Op("fs", "{x} = self.{m}({x})", "self.{m} = nn.Linear({D}, {N})", "last:N"),
    "matmul": Op(
        "fs",
        "{x} = torch.matmul({x}, self.{m})",
        "self.{m} = nn.Parameter(torch.randn({D}, {N}) / {D} ** 0.5)",
        "last:N",
    ),
    "mm": Op(
        "f", "{x} = torch.mm({x}, self.{m})", "self.{m} = nn.Parameter(torch.randn({D}, {N}) / {D} ** 0.5)", "last:N"
    ),
    "addmm": Op(
        "f",
        "{x} = torch.addmm(self.{m}_bias, {x}, self.{m})",
        "self.{m} = nn.Parameter(torch.randn({D}, {N}) / {D} ** 0.5); self.{m}_bias = nn.Parameter(torch.randn({N}) * 0.1)",
        "last:N",
    ),
    "bmm": Op("s", "{x} = torch.bmm({x}, {x}.transpose(1, 2)) / {D}", shape="last:L"),
    "baddbmm": Op(
        "s",
        "{x} = torch.baddbmm(self.{m}, {x}, {x}.transpose(1, 2), alpha=1.0 / {D})",
        "self.{m} = nn.Parameter(torch.randn(1, {L}, {L}) * 0.1)",
        "last:L",
    ),
    "einsum": Op(
        "s",
        '{x} = torch.einsum("bld,de->ble", {x}, self.{m})',
        "self.{m} = nn.Parameter(torch.randn({D}, {N}) / {D} ** 0.5)",
        "last:N",
    ),
    "bilinear": Op("f", "{x} = self.{m}({x}, {x})", "self.{m} = nn.Bilinear({D}, {D}, {N})", "last:N"),
    # convolution (spatial layouts: the suffix follows the layout)
    "conv1d": Op("g", "{x} = self.{m}({x})", "self.{m} = nn.Conv1d({C}, {N}, {k}, padding={k} // 2)", "chan:N"),
    "conv2d": Op("i", "{x} = self.{m}({x})", "self.{m} = nn.Conv2d({C}, {N}, {k}, padding={k} // 2)", "chan:N"),
    "conv3d": Op("v", "{x} = self.{m}({x})", "self.{m} = nn.Conv3d({C}, {N}, 3, padding=1)", "chan:N"),
    "conv_transpose1d": Op(
        "g", "{x} = self.{m}({x})", "self.{m} = nn.ConvTranspose1d({C}, {N}, 2, stride=2)", "chan:N,spatial:*2"
    ),
    "conv_transpose2d": Op(
        "i", "{x} = self.{m}({x})", "self.{m} = nn.ConvTranspose2d({C}, {N}, 2, stride=2)", "chan:N,spatial:*2"
    ),
    "conv_transpose3d": Op(
        "v", "{x} = self.{m}({x})", "self.{m} = nn.ConvTranspose3d({C}, {N}, 2, stride=2)", "chan:N,spatial:*2"
    ),
    # normalisation
    "layer_norm": Op(ANY, "{x} = self.{m}({x})", "self.{m} = nn.LayerNorm({D})"),
    "rms_norm": Op(ANY, "{x} = self.{m}({x})", "self.{m} = nn.RMSNorm({D})"),
    "normalize": Op(ANY, "{x} = F.normalize({x}, dim=-1) * {D} ** 0.5"),
    "batch_norm": Op("fgiv", "{x} = self.{m}({x})", "self.{m} = nn.BatchNorm{dim}({C})"),
    "group_norm": Op("giv", "{x} = self.{m}({x})", "self.{m} = nn.GroupNorm(4, {C})"),
    "instance_norm": Op("giv", "{x} = self.{m}({x})", "self.{m} = nn.InstanceNorm{dim}({C}, affine=True)"),
    "local_response_norm": Op("gi", "{x} = F.local_response_norm({x}, 5)"),
    # pooling
    "max_pool1d": Op("g", "{x} = F.max_pool1d({x}, 2)", shape="spatial:/2"),
    "max_pool2d": Op("i", "{x} = F.max_pool2d({x}, 2)", shape="spatial:/2"),
    "max_pool3d": Op("v", "{x} = F.max_pool3d({x}, 2)", shape="spatial:/2"),
    "avg_pool1d": Op("g", "{x} = F.avg_pool1d({x}, 2)", shape="spatial:/2"),
    "avg_pool2d": Op("i", "{x} = F.avg_pool2d({x}, 2)", shape="spatial:/2"),
    "avg_pool3d": Op("v", "{x} = F.avg_pool3d({x}, 2)", shape="spatial:/2"),
    "adaptive_avg_pool1d": Op("g", "{x} = F.adaptive_avg_pool1d({x}, {x}.shape[-1] // 2)", shape="spatial:/2"),
    "adaptive_avg_pool2d": Op("i", "{x} = F.adaptive_avg_pool2d({x}, {x}.shape[-1] // 2)", shape="spatial:/2"),
    "adaptive_max_pool1d": Op("g", "{x} = F.adaptive_max_pool1d({x}, {x}.shape[-1] // 2)", shape="spatial:/2"),
    "adaptive_max_pool2d": Op("i", "{x} = F.adaptive_max_pool2d({x}, {x}.shape[-1] // 2)", shape="spatial:/2"),
    "lp_pool1d": Op("g", "{x} = F.lp_pool1d({x}, 2, 2)", shape="spatial:/2"),
    "lp_pool2d": Op("i", "{x} = F.lp_pool2d({x}, 2, 2)", shape="spatial:/2"),
    # resampling
    "interpolate": Op(
        "gi", '{x} = F.interpolate({x}, scale_factor=2, mode="{mode}", align_corners=False)', shape="spatial:*2"
    ),
    "pixel_shuffle": Op("i", "{x} = F.pixel_shuffle({x}, 2)", shape="chan:/4,spatial:*2"),
    "pixel_unshuffle": Op("i", "{x} = F.pixel_unshuffle({x}, 2)", shape="chan:*4,spatial:/2"),
    # attention and recurrent layers
    "scaled_dot_product_attention": Op(
        "s",
        "b, n, d = {x}.shape; q = {x}.view(b, n, 4, d // 4).transpose(1, 2); {x} = F.scaled_dot_product_attention(q, q, q).transpose(1, 2).reshape(b, n, d)",
    ),
    "multi_head_attention": Op(
        "s",
        "{x}, _ = self.{m}({x}, {x}, {x}, need_weights=False)",
        "self.{m} = nn.MultiheadAttention({D}, 4, batch_first=True)",
    ),
    "lstm": Op("s", "{x}, _ = self.{m}({x})", "self.{m} = nn.LSTM({D}, {N}, batch_first=True)", "last:N"),
    "gru": Op("s", "{x}, _ = self.{m}({x})", "self.{m} = nn.GRU({D}, {N}, batch_first=True)", "last:N"),
    # indexing
    "embedding": Op("t", "{x} = self.{m}({x})", "self.{m} = nn.Embedding(vocab_size, {N})", "tokens"),
    "gather": Op(
        ANY, "{x} = torch.gather({x}, -1, self.{m}.expand_as({x}))", 'self.register_buffer("{m}", torch.randperm({D}))'
    ),
    "index_select": Op(
        ANY, "{x} = torch.index_select({x}, -1, self.{m}) - {x}", 'self.register_buffer("{m}", torch.randperm({D}))'
    ),
    "tril": Op(ANY, "{x} = torch.tril({x}) + 0.5 * {x}"),
    "triu": Op(ANY, "{x} = torch.triu({x}) - 0.5 * {x}"),
    "roll": Op(ANY, "{x} = {x} - torch.roll({x}, shifts=1, dims=-1)"),
    "flip": Op(ANY, "{x} = {x} + 0.5 * torch.flip({x}, dims=[-1])"),
    "masked_fill": Op(ANY, "{x} = {x}.masked_fill({x} < -0.5, -0.5)"),
    "scatter_add": Op(
        ANY,
        "{x} = {x} + torch.zeros_like({x}).scatter_add(-1, self.{m}.expand_as({x}), {x})",
        'self.register_buffer("{m}", torch.randperm({D}))',
    ),
    "take_along_dim": Op(
        ANY,
        "{x} = torch.take_along_dim({x}, self.{m}.expand_as({x}), dim=-1) * {x}",
        'self.register_buffer("{m}", torch.randperm({D}))',
    ),
    # ranking, used through their values (indices as outputs would be tie-prone)
    "topk": Op(ANY, "{x} = {x} - torch.topk({x}, 4, dim=-1).values[..., -1:]"),
    "sort": Op(ANY, "{x} = torch.sort({x}, dim=-1).values"),
    "argsort": Op(ANY, "{x} = torch.gather({x}, -1, torch.argsort({x}, dim=-1, descending=True))"),
    "argmax": Op(ANY, "{x} = {x} - torch.gather({x}, -1, torch.argmax({x}, dim=-1, keepdim=True))"),
    "argmin": Op(ANY, "{x} = {x} - torch.gather({x}, -1, torch.argmin({x}, dim=-1, keepdim=True))"),
    "kthvalue": Op(ANY, "{x} = {x} - torch.kthvalue({x}, 2, dim=-1, keepdim=True).values"),
    "median": Op(ANY, "{x} = {x} - {x}.median(dim=-1, keepdim=True).values"),
    # distances and losses: the output's last step
    "cdist": Op("s", "{x} = torch.cdist({x}, {x}) / {D} ** 0.5", shape="last:L"),
    "cosine_similarity": Op(ANY, "{x} = F.cosine_similarity({x}, {T}, dim=-1)", shape="drop", final=True),
    "pairwise_distance": Op(ANY, "{x} = F.pairwise_distance({x}, {T})", shape="drop", final=True),
    "mse_loss": Op(ANY, '{x} = F.mse_loss({x}, {T}, reduction="none")', final=True),
    "l1_loss": Op(ANY, '{x} = F.l1_loss({x}, {T}, reduction="none")', final=True),
    "smooth_l1_loss": Op(ANY, '{x} = F.smooth_l1_loss({x}, {T}, reduction="none", beta=0.5)', final=True),
    "huber_loss": Op(ANY, '{x} = F.huber_loss({x}, {T}, reduction="none", delta=0.5)', final=True),
    "kl_div": Op(ANY, '{x} = F.kl_div({x}, {U}, reduction="none")', final=True),
    "binary_cross_entropy_with_logits": Op(
        ANY, '{x} = F.binary_cross_entropy_with_logits({x}, {U}, reduction="none")', final=True
    ),
    "poisson_nll_loss": Op(ANY, '{x} = F.poisson_nll_loss({x}, {U}, reduction="none")', final=True),
    "soft_margin_loss": Op(ANY, '{x} = F.soft_margin_loss({x}, {S}, reduction="none")', final=True),
    "cross_entropy": Op(
        "fs",
        '{x} = F.cross_entropy({x}.transpose(1, -1), {U}.transpose(1, -1), reduction="none")',
        shape="ce",
        final=True,
    ),
}


def spatial_suffix(layout: str) -> str:
    """'1d', '2d' or '3d' for a spatial layout code."""
    return _SPATIAL[layout]

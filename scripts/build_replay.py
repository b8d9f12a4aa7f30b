"""Build the bundled replay file of the README's main command from the hand-written fixtures.

    python scripts/build_replay.py        # writes src/kernelzero/data/kz_basic_replay.jsonl

Two Triton completions per task for eleven kz-basic tasks: correct kernels, wrong ones, kernels
that do not compile for the GPU, a completion cut off by the token limit, and a PyTorch
fallback, each wrapped in the kind of prose a model writes around its answer. The fixtures'
header comments (their expected statuses) are stripped, so nothing in a completion tells the
verifier what to expect.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "kernels"
OUT = ROOT / "src" / "kernelzero" / "data" / "kz_basic_replay.jsonl"
HEADER = re.compile(r"^# (task|backend|expect|expect-cpu|why|options|attack|policy|naive|gpu):.*\n", re.MULTILINE)

PLAN = [  # (task, [(fixture or generated variant, prose style)])
    ("level1/21_GELU", ["correct/triton_gelu.py", "wrong/triton_gelu_bad_mask.py"]),
    ("level1/24_LeakyReLU", ["correct/triton_leaky_relu.py", "wrong/triton_leaky_relu_inplace.py"]),
    ("level1/2_Rectangular_Matmul", ["correct/triton_matmul.py", "wrong/triton_matmul_dot_k8.py"]),
    ("level1/18_RMSNorm", ["correct/triton_rmsnorm.py", "wrong/triton_rmsnorm_nan.py"]),
    ("level1/11_Sum_Over_Dim", ["correct/triton_sum_dim.py", "wrong/triton_sum_wrong_axis.py"]),
    ("level1/15_Softmax", ["correct/triton_softmax.py", "think:correct/triton_softmax.py"]),
    ("level2/1_Gemm_Bias_Gelu", ["correct/triton_gemm_bias_gelu.py", "think:correct/triton_gemm_bias_gelu.py"]),
    (
        "level2/8_Bias_Residual_LayerNorm",
        ["correct/triton_bias_residual_layernorm.py", "truncated:correct/triton_bias_residual_layernorm.py"],
    ),
    ("level1/12_Mean_Over_Last_Dim", ["wrong/triton_mean_keepdim.py", "fallback:mean"]),
    ("level1/22_SiLU", ["wrong/triton_tl_typo.py", "refusal:"]),
    ("level1/23_Softplus", ["wrong/triton_launch_missing_arg.py", "fallback:softplus"]),
]

FALLBACKS = {
    "mean": "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n\n    def forward(self, x):\n        return x.mean(dim=-1)\n",
    "softplus": "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n"
    "    def __init__(self, beta, threshold):\n        super().__init__()\n        self.beta, self.threshold = beta, threshold\n\n"
    "    def forward(self, x):\n        return F.softplus(x, self.beta, self.threshold)\n",
}


def code_of(fixture: str) -> str:
    return HEADER.sub("", (KERNELS / fixture).read_text()).strip() + "\n"


@dataclass(frozen=True)
class Prose:
    """What a model writes around its code, per kernel language (build_helion_replay.py has Helion's)."""

    intros: tuple[str, str]  # alternating between samples
    outro: str
    think: str  # the reasoning of a `think:` sample
    refusal: str


TRITON = Prose(
    intros=(
        "Here is an optimized implementation with a custom Triton kernel.",
        "Below, `ModelNew` replaces the PyTorch operators with a fused Triton kernel.",
    ),
    outro="The kernel processes one block per program and masks the ragged edge.",
    think="The reference is memory-bound; one pass over the rows keeps the data in registers.",
    refusal="I am not able to write a Triton kernel for this operation without more information.",
)


def wrap(code: str, idx: int, prose: Prose) -> str:
    return f"{prose.intros[idx % 2]}\n\n```python\n{code}```\n\n{prose.outro}\n"


def completion(spec: str, idx: int, prose: Prose = TRITON) -> tuple[str, str]:
    """(text, finish_reason) for one planned sample."""
    kind, _, rest = (
        spec.partition(":") if ":" in spec and not spec.startswith(("correct/", "wrong/")) else ("", "", spec)
    )
    if kind == "think":
        return f"<think>\n{prose.think}\n</think>\n" + wrap(code_of(rest), idx, prose), "stop"
    if kind == "truncated":
        text = wrap(code_of(rest), idx, prose)
        return text[: len(text) * 2 // 3], "length"
    if kind == "fallback":
        return f"This operation is already efficient in PyTorch:\n\n```python\n{FALLBACKS[rest]}```\n", "stop"
    if kind == "refusal":
        return prose.refusal, "stop"
    return wrap(code_of(spec), idx, prose), "stop"


def write(plan: list, out: Path, prose: Prose = TRITON) -> None:
    """Write the replay file of `plan` (task, [spec per sample]) to `out`."""
    lines = []
    for task, specs in plan:
        for idx, spec in enumerate(specs):
            text, finish = completion(spec, idx, prose)
            lines.append(json.dumps({"task": task, "sample_idx": idx, "completion": text, "finish_reason": finish}))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} completions to {out.relative_to(ROOT)}")


def main() -> None:
    write(PLAN, OUT)


if __name__ == "__main__":
    main()

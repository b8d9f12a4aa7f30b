"""Build the bundled Helion replay file for `kernelzero eval kz-basic --backend helion` from the Helion fixtures.

    python scripts/build_helion_replay.py   # writes src/kernelzero/data/kz_basic_helion_replay.jsonl

Two Helion completions per task for ten kz-basic tasks, like the Triton replay (`build_replay.py`): correct
kernels, wrong ones (wrong values, dtype, shape, NaN, a misspelt op Helion cannot compile, a missing argument,
autotuning asked for), a completion cut off by the token limit, PyTorch fallbacks and a refusal, each wrapped in
prose. The fixtures' header comments (their expected statuses) are stripped.

    kernelzero eval kz-basic --backend helion --preset smoke -n 2      # this file is the default replay for helion
"""

from __future__ import annotations

from pathlib import Path

import build_replay  # same folder: run as `python scripts/build_helion_replay.py`
from build_replay import Prose

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "kernelzero" / "data" / "kz_basic_helion_replay.jsonl"
C, W = "correct/helion/helion_", "wrong/helion/helion_"

PLAN = [  # (task, [fixture or variant, ...]): sample i is the i-th entry
    ("level1/21_GELU", [f"{C}gelu.py", f"{W}gelu_half_output.py"]),
    ("level1/24_LeakyReLU", [f"{C}leaky_relu.py", f"{W}no_kernel.py"]),
    ("level1/2_Rectangular_Matmul", [f"{C}matmul.py", f"{W}matmul_autotune.py"]),
    ("level1/18_RMSNorm", [f"{C}rmsnorm.py", f"{W}rmsnorm_nan.py"]),
    ("level1/11_Sum_Over_Dim", [f"{C}sum_dim.py", f"{W}sum_wrong_axis.py"]),
    ("level1/15_Softmax", [f"{C}softmax.py", f"think:{C}softmax.py"]),
    ("level2/1_Gemm_Bias_Gelu", [f"{C}gemm_bias_gelu.py", f"truncated:{C}gemm_bias_gelu.py"]),
    ("level1/12_Mean_Over_Last_Dim", [f"{W}mean_keepdim.py", "fallback:mean"]),
    ("level1/22_SiLU", [f"{W}silu_typo.py", "refusal:"]),
    ("level1/23_Softplus", [f"{W}softplus_missing_arg.py", "fallback:softplus"]),
]


HELION = Prose(
    intros=(
        "Here is an optimized implementation with a Helion kernel.",
        "Below, `ModelNew` runs the computation in a fused Helion kernel (compiled to Triton).",
    ),
    outro="The hl.tile loop is the GPU kernel; Helion masks the ragged last tile.",
    think="One row per program keeps the row in registers; max, exp and sum in one pass.",
    refusal="I cannot write a Helion kernel for this operation without more information.",
)


def completion(spec: str, idx: int) -> tuple[str, str]:
    """(text, finish_reason) for one planned sample."""
    return build_replay.completion(spec, idx, HELION)


def main() -> None:
    build_replay.write(PLAN, OUT, HELION)


if __name__ == "__main__":
    main()

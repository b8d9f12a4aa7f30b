"""Verify hand-written Triton candidates on KernelBench problems and report per-stage times.

    PYTHONPATH=src python bench/verify_kernelbench.py KERNELBENCH.jsonl --out bench/verify_kb_h200.md

Candidates are in bench/candidates/kernelbench/ (written for this project). Sizes are scaled so
every tensor stays at a few hundred MB (the verifier moves inputs and outputs through the host).
Overhead = total - build (spawn, init, reference, correctness, timing, reference timing).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import preflight  # bench/preflight.py: what this call needs, checked first
import torch

from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for, verify

HERE = Path(__file__).parent / "candidates" / "kernelbench"
CASES = [  # (task name, candidate file, scale)
    ("level1/19_ReLU", "l1_19_relu_triton.py", 0.25),
    ("level1/23_Softmax", "l1_23_softmax_triton.py", 0.25),
    ("level1/1_Square_matrix_multiplication_", "l1_1_matmul_triton.py", 1.0),
    ("level1/47_Sum_reduction_over_a_dimension", "l1_47_sum_dim_triton.py", 0.25),
    ("level1/88_MinGPTNewGelu", "l1_88_gelu_triton.py", 1.0),
    ("level2/76_Gemm_Add_ReLU", "l2_76_gemm_add_relu_triton.py", 1.0),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--profile", default="default")
    args = ap.parse_args()
    dataset = "KernelBench's dataset (a .jsonl: copy ../shared/data/kernelbench.jsonl into .gpu/ and carry .gpu)"
    preflight.require(gpus=1, files=[(args.dataset, dataset)] if args.dataset.endswith(".jsonl") else [])
    tasks = load_suite(args.dataset).tasks
    rows = [
        "| task | scale | status | cand ms | eager ms | speedup | build s | load s | correctness s | timing s | ref timing s | total s | overhead s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, cand, scale in CASES:
        if not (HERE / cand).exists():
            continue
        (task,) = select(tasks, names=[name])
        task = resize(task, scale=scale)
        v = verify(task, (HERE / cand).read_text(), "triton", options_for(args.profile, device="cuda"))
        s = v.stage_seconds
        total = s.get("total", 0.0)
        fmt = lambda x: f"{x:.3f}" if x is not None else "n/a"  # noqa: E731
        rows.append(
            f"| {name} | {scale} | {v.status} | {fmt(v.timing.median_ms if v.timing else None)} | "
            f"{fmt(v.ref_eager.median_ms if v.ref_eager else None)} | {fmt(v.speedup_eager)} | {s.get('build', 0):.2f} | "
            f"{s.get('load', 0):.2f} | {s.get('correctness', 0):.2f} | {s.get('timing', 0):.2f} | "
            f"{s.get('reference_timing', 0):.2f} | {total:.2f} | {total - s.get('build', 0):.2f} |"
        )
        print(rows[-1], v.message[:200], flush=True)
    head = f"KernelBench verify, profile {args.profile}, {torch.cuda.get_device_name()}, torch {torch.__version__}, {datetime.date.today()}\n"
    args.out.write_text(head + "\n" + "\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

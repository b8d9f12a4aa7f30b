"""Timing fidelity panel (issue 26, item 2): does kernelzero's speedup agree with `triton.testing.do_bench`'s?

What it measures, per case (an honest Triton or CUDA kernel of bench/candidates/kernelbench/ on a KernelBench
Level 1 or 2 problem, at sizes that put the kernels between about 5 us and 10 ms on one H200; CASES says which and
why each takes the time it should):
- do_bench: in this process, the task's `Model` and the candidate's `ModelNew` built from the same init inputs under
  the same seed, the inputs from `get_inputs()` under a fixed seed, outputs compared once (atol = rtol = 1e-2), then
  each side timed by `triton.testing.do_bench` (L2 cleared before every call, CUDA events, median), three rounds
  alternating the sides, the median of the rounds kept, while holding the judge's exclusive GPU lease;
  do_bench speedup = reference ms / candidate ms.
- kernelzero: `verify(task, candidate, backend, options_for(device="cuda"))` --repeats times (default 5), each in
  fresh judge, reference and worker processes; each run's `speedup_eager`, `timing.median_ms`, `ref_eager.median_ms`.
- loaded pool: after the unloaded runs of every case, each case verified --loaded-repeats more times (default 2)
  through one `LocalPool` (service/pool.py) of --pool-per-gpu verifications in flight (default 6) on the same GPU:
  the cases load each other, and lanes with nothing measured left verify LOAD_CASES until the last is done.
  bench/timing_panel_gpu.py holds this side.

Records: one markdown row per case, appended to --out as soon as its unloaded runs are done (a run stopped early
keeps its rows; the table is written again whole with the loaded column at the end), with: case, backend, task and sizes, expected time; do_bench candidate and reference ms and speedup;
kernelzero's candidate and reference ms (medians over the runs), each run's speedup, their median, min, max and range
(% of the median); the deviation of kernelzero's median speedup from do_bench's (%); the goals; the loaded pool's
speedups, deviation and goal; notes (statuses other than correct, runs cut by the budget). Every single run also goes
to a JSON-lines file beside --out (`.jsonl`). Cases the budget leaves no room for are named at the end.
Goals (issue 26): deviation within 5% for kernels of 20 us and more by do_bench's candidate time, 10% below; range
over the runs at most 2% for kernels of 100 us and more; the loaded deviation within the same bound.

Run on one H200 (one device call: at most 10 minutes; `.gpu` carried, holding kernelbench.jsonl and the wheels):
    PYTHONPATH=src python3 bench/timing_panel.py .gpu/kernelbench.jsonl --out $OUT/timing_panel.md --budget-s 540
    ... --cases relu_tiny,gemm_relu_div_cuda      a subset (ids of CASES)
    ... --loaded-repeats 0                          no loaded pool (all the budget to the unloaded runs)
    ... --profile events --parallel 3               another profile; three fresh runs of a case at once
    PYTHONPATH=src python3 bench/timing_panel.py ../shared/data/kernelbench.jsonl --dry-run    on a CPU: the plan
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import preflight  # noqa: E402 (bench/preflight.py: what this call needs, checked first)

from kernelzero.tasks import load_suite, resize, select, size_globals  # noqa: E402
from kernelzero.types import PROFILES  # noqa: E402

HERE = ROOT / "bench" / "candidates" / "kernelbench"
SEED = 1234  # init inputs, both models' parameters (reset before each) and, plus one, the inputs
DEV_GOAL_PCT = {True: 5.0, False: 10.0}  # kernel of 20 us or more: within 5%; below: within 10%
RANGE_GOAL_PCT = 2.0  # the range over the runs, for kernels of 100 us or more
LOAD_CASES = ("swish", "gelu", "softmax", "sum_dim")  # what idle lanes of the loaded pool verify


@dataclass(frozen=True)
class Case:
    """One kernel of the panel."""

    id: str  # short name for --cases and the table
    task: str  # KernelBench task name, "level1/19_ReLU"
    candidate: str  # file in bench/candidates/kernelbench/
    backend: str  # "triton" or "cuda"
    sizes: dict = field(default_factory=dict)  # size globals overridden (Task.sizes)
    expected_us: float = 0.0  # the candidate's expected time on one H200
    why: str = ""  # how that time follows from bytes moved (about 4 TB/s) or operations done


# fmt: off
CASES = [  # (id, task, candidate, backend, sizes, expected us on one H200, why): from launch-bound to ~10 ms
    Case("relu_tiny", "level1/19_ReLU", "l1_19_relu_triton.py", "triton", {"batch_size": 16, "dim": 4096}, 5,
         "64K floats, 0.5 MB moved: launch-bound (a few us of launch and tail)"),
    Case("leaky_relu_cuda", "level1/20_LeakyReLU", "l1_20_leaky_relu_cuda.py", "cuda",
         {"batch_size": 256, "dim": 16384}, 10, "4M floats, 32 MB moved at ~4 TB/s: 8 us plus launch"),
    Case("swish", "level1/25_Swish", "l1_25_swish_triton.py", "triton", {"batch_size": 512, "dim": 16384}, 20,
         "8M floats, 64 MB moved: 16 us plus launch"),
    Case("gelu", "level1/88_MinGPTNewGelu", "l1_88_gelu_triton.py", "triton", {"batch_size": 4096, "dim": 4096}, 35,
         "16M floats, 128 MB moved: 32 us; the arithmetic hides under the loads"),
    Case("softmax", "level1/23_Softmax", "l1_23_softmax_triton.py", "triton", {"batch_size": 1024, "dim": 16384}, 50,
         "16M floats: 64 MB read twice (the second pass mostly from L2) and 64 MB written"),
    Case("sum_dim", "level1/47_Sum_reduction_over_a_dimension", "l1_47_sum_dim_triton.py", "triton",
         {"batch_size": 32, "dim1": 2048, "dim2": 1023}, 70, "67M floats, 268 MB read once, 0.1 MB written"),
    Case("matrix_scalar_cuda", "level1/5_Matrix_scalar_multiplication", "l1_5_matrix_scalar_cuda.py", "cuda",
         {"M": 8192, "N": 8192}, 130, "64M floats, 512 MB moved"),
    Case("rmsnorm_cuda", "level1/36_RMSNorm_", "l1_36_rmsnorm_cuda.py", "cuda",
         {"batch_size": 16, "features": 64, "dim1": 256, "dim2": 256}, 200,
         "64M floats, 512 MB moved once, plus the second walk over the features, partly from L2"),
    Case("gemm_add_relu", "level2/76_Gemm_Add_ReLU", "l2_76_gemm_add_relu_triton.py", "triton", {}, 800,
         "1024x8192x8192, 137 GFLOP in tf32 tl.dot with 64x64 tiles: ~170 TFLOP/s"),
    Case("matmul_sub_mul_relu", "level2/9_Matmul_Subtract_Multiply_ReLU", "l2_9_matmul_sub_mul_relu_triton.py",
         "triton", {"batch_size": 2048}, 1500, "2048x8192x8192, 275 GFLOP in tf32 with 128x128 tiles: ~200 TFLOP/s"),
    Case("matmul_8k", "level1/1_Square_matrix_multiplication_", "l1_1_matmul_triton.py", "triton", {"N": 8192}, 6000,
         "8192^3, 1.1 TFLOP in tf32 tl.dot with 64x64 tiles: ~180 TFLOP/s (the fp32 reference ~20 ms)"),
    Case("gemm_relu_div_cuda", "level2/63_Gemm_ReLU_Divide", "l2_63_gemm_relu_div_cuda.py", "cuda", {}, 10000,
         "1024x8192x8192, 137 GFLOP in plain fp32 FMAs, 4x4 register tiles: ~14 TFLOP/s"),
]
# fmt: on


# -- the row's numbers (pure; tests/test_timing_panel.py) ----------------------------------------------------------


def spread(speedups: list[float]) -> dict:
    """Median, min, max and range (% of the median) of a run's speedups; {} for none."""
    if not speedups:
        return {}
    med = statistics.median(speedups)
    return {
        "median": med,
        "min": min(speedups),
        "max": max(speedups),
        "range_pct": (max(speedups) - min(speedups)) / med * 100.0,
    }


def deviation_pct(speedup: float, reference: float) -> float:
    """How far `speedup` lies from `reference` (do_bench's), in % of the reference."""
    return (speedup - reference) / reference * 100.0


def row_numbers(db_cand_ms: float, db_ref_ms: float, speedups: list[float], loaded: list[float]) -> dict:
    """Everything a row states, from do_bench's two times and kernelzero's speedups (unloaded, loaded).

    Goals are True, False or None (not applicable: too few runs, a kernel under 100 us for the range, no runs).
    """
    db = db_ref_ms / db_cand_ms
    long_kernel = db_cand_ms >= 0.020
    tol = DEV_GOAL_PCT[long_kernel]
    out = {"db_speedup": db, "dev_tol_pct": tol, "kz": spread(speedups), "loaded": spread(loaded)}
    out["dev_pct"] = deviation_pct(out["kz"]["median"], db) if speedups else None
    out["dev_ok"] = abs(out["dev_pct"]) <= tol if speedups else None
    applies = db_cand_ms >= 0.100 and len(speedups) >= 2
    out["range_ok"] = out["kz"]["range_pct"] <= RANGE_GOAL_PCT if applies else None
    out["loaded_dev_pct"] = deviation_pct(out["loaded"]["median"], db) if loaded else None
    out["loaded_ok"] = abs(out["loaded_dev_pct"]) <= tol if loaded else None
    return out


def _goal(ok: bool | None) -> str:
    return "n/a" if ok is None else "yes" if ok else "NO"


HEADER = (
    "| case | backend | task, sizes | expected | do_bench cand / ref ms | do_bench speedup | kz cand / ref ms | "
    "kz speedups (runs) | kz median [min, max] | range | dev | goals: dev, range | loaded speedups | loaded dev | "
    "loaded goal | notes |\n" + "|---" * 16 + "|"
)


def format_row(case: Case, db: tuple[float, float], runs: list[dict], loaded: list[dict], notes: list[str]) -> str:
    """One markdown row; `runs` and `loaded` are run records (`run_record`), correct or not."""
    good = [r for r in runs if r["speedup"]]
    n = row_numbers(db[0], db[1], [r["speedup"] for r in good], [r["speedup"] for r in loaded if r["speedup"]])
    kz = n["kz"]
    f = lambda x, p=3: "-" if x is None else f"{x:.{p}f}"  # noqa: E731
    pct = lambda x: "-" if x is None else f"{x:+.1f}%"  # noqa: E731
    cand = statistics.median(r["cand_ms"] for r in good) if good else None
    ref = statistics.median(r["ref_ms"] for r in good) if good else None
    sizes = ", ".join(f"{k}={v}" for k, v in case.sizes.items()) or "as in KernelBench"
    cells = [
        case.id,
        case.backend,
        f"{case.task} ({sizes})",
        f"{case.expected_us:g} us",
        f"{f(db[0], 4)} / {f(db[1], 4)}",
        f(n["db_speedup"]),
        f"{f(cand, 4)} / {f(ref, 4)}",
        ", ".join(f(r["speedup"]) for r in runs) or "-",
        f"{f(kz['median'])} [{f(kz['min'])}, {f(kz['max'])}]" if kz else "-",
        f"{kz['range_pct']:.1f}%" if kz else "-",
        pct(n["dev_pct"]),
        f"{_goal(n['dev_ok'])} (±{n['dev_tol_pct']:g}%), {_goal(n['range_ok'])}",
        ", ".join(f(r["speedup"]) for r in loaded) or "-",
        pct(n["loaded_dev_pct"]),
        _goal(n["loaded_ok"]),
        "; ".join(notes) or "",
    ]
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


# -- the plan (CPU) ------------------------------------------------------------------------------------------------


def pick(ids: str) -> list[Case]:
    """The cases named in a comma-separated list (all for ''); an unknown id raises ValueError naming the valid."""
    if not ids:
        return list(CASES)
    known = {c.id: c for c in CASES}
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise ValueError(f"unknown case(s) {unknown}; cases are: {', '.join(known)}")
    return [known[i] for i in wanted]


def plan(dataset: str, cases: list[Case]) -> tuple[dict, list[str]]:
    """Each case's task with its sizes applied ({case id: Task}) and the problems found (nothing is run)."""
    tasks = load_suite(dataset).tasks
    out, problems = {}, []
    for case in cases:
        path = HERE / case.candidate
        if not path.is_file():
            problems.append(f"{case.id}: no candidate file {path}")
        else:
            try:
                tree = ast.parse(path.read_text())
            except SyntaxError as exc:
                problems.append(f"{case.id}: {case.candidate} line {exc.lineno}: {exc.msg}")
            else:
                if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
                    problems.append(f"{case.id}: {case.candidate} defines no top-level class ModelNew")
        found = select(tasks, names=[case.task])
        if len(found) != 1:
            problems.append(f"{case.id}: task {case.task} not in {dataset} ({len(found)} matches)")
            continue
        try:
            out[case.id] = resize(found[0], sizes=dict(case.sizes))
        except ValueError as exc:
            problems.append(f"{case.id}: sizes {case.sizes}: {exc}")
    return out, problems


def print_plan(cases: list[Case], tasks: dict) -> None:
    for case in cases:
        task = tasks.get(case.id)
        globals_ = {**size_globals(task.source), **task.sizes} if task else {}
        shown = ", ".join(f"{k}={v}" for k, v in globals_.items())
        print(f"  {case.id:20s} {case.backend:6s} ~{case.expected_us:>6g} us  {case.task} [{shown}]: {case.why}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="KernelBench's problems (.jsonl), e.g. .gpu/kernelbench.jsonl on the GPU machine")
    p.add_argument("--out", type=Path, help="markdown table, written row by row (runs go to the same name .jsonl)")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop starting work past this many seconds")
    p.add_argument("--cases", default="", help="comma-separated case ids (default: all, in order)")
    p.add_argument("--repeats", type=int, default=5, help="fresh verifications per case")
    p.add_argument(
        "--parallel", type=int, default=1, help="fresh verifications of a case at a time (each timed alone on the GPU)"
    )
    p.add_argument(
        "--loaded-repeats", type=int, default=2, help="verifications a case inside the loaded pool (0: none)"
    )
    p.add_argument("--pool-per-gpu", type=int, default=6, help="the loaded pool's verifications in flight on the GPU")
    p.add_argument("--loaded-s", type=float, default=150.0, help="seconds of the budget kept for the loaded pool")
    p.add_argument(
        "--profile",
        default="default",
        choices=sorted(PROFILES),
        help="the verifier's profile for kernelzero's runs (kernelbench: KernelBench's protocol, mean of 100 calls)",
    )
    p.add_argument("--dry-run", action="store_true", help="CPU: load and check every case, print the plan, run nothing")
    args = p.parse_args(argv)
    start = time.monotonic()
    if args.parallel < 1 or args.repeats < 1:
        print("timing_panel: --parallel and --repeats must be at least 1", flush=True)
        return 2
    try:
        cases = pick(args.cases)
    except ValueError as exc:
        print(f"timing_panel: {exc}", flush=True)
        return 2
    if not args.dry_run:
        what = "KernelBench's problems (copy ../shared/data/kernelbench.jsonl into .gpu/ and carry .gpu)"
        preflight.require(gpus=1, files=[(args.dataset, what)], name="timing_panel.py")
    tasks, problems = plan(args.dataset, cases)
    print(f"timing_panel: {len(cases)} case(s), expected kernel times:", flush=True)
    print_plan(cases, tasks)
    if problems:
        print("timing_panel: not ready:\n  " + "\n  ".join(problems), flush=True)
        return 1 if args.dry_run else 2
    if args.dry_run:
        print("timing_panel: dry run: every case loads, every candidate parses and names ModelNew", flush=True)
        return 0
    import timing_panel_gpu  # bench/timing_panel_gpu.py: torch, Triton and the verifier on the GPU

    return timing_panel_gpu.measure(args, cases, tasks, start)


if __name__ == "__main__":
    sys.exit(main())

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
- loaded pool: the same verification --loaded-repeats times (default 2) through a `LocalPool` (service/pool.py) whose
  other --load-jobs lanes (default 4) keep verifying the panel's Triton load cases on the same GPU meanwhile.

Records: one markdown row per case, appended to --out as soon as the case is done (a run stopped early keeps its
rows), with: case, backend, task and sizes, expected time; do_bench candidate and reference ms and speedup;
kernelzero's candidate and reference ms (medians over the runs), each run's speedup, their median, min, max and range
(% of the median); the deviation of kernelzero's median speedup from do_bench's (%); the goals; the loaded pool's
speedups, deviation and goal; notes (statuses other than correct, runs cut by the budget). Every single run also goes
to a JSON-lines file beside --out (`.jsonl`). Cases the budget leaves no room for are named at the end.
Goals (issue 26): deviation within 5% for kernels of 20 us and more by do_bench's candidate time, 10% below; range
over the runs at most 2% for kernels of 100 us and more; the loaded deviation within the same bound.

Run on one H200 (one device call: at most 10 minutes; `.gpu` carried, holding kernelbench.jsonl and the wheels):
    PYTHONPATH=src python3 bench/timing_panel.py .gpu/kernelbench.jsonl --out $OUT/timing_panel.md --budget-s 540
    ... --cases relu_tiny,gemm_relu_div_cuda      a subset (ids of CASES)
    PYTHONPATH=src python3 bench/timing_panel.py ../shared/data/kernelbench.jsonl --dry-run    on a CPU: the plan
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import preflight  # noqa: E402 (bench/preflight.py: what this call needs, checked first)

from kernelzero.tasks import load_suite, resize, select, size_globals  # noqa: E402

HERE = ROOT / "bench" / "candidates" / "kernelbench"
SEED = 1234  # init inputs, both models' parameters (reset before each) and, plus one, the inputs
DEV_GOAL_PCT = {True: 5.0, False: 10.0}  # kernel of 20 us or more: within 5%; below: within 10%
RANGE_GOAL_PCT = 2.0  # the range over the runs, for kernels of 100 us or more
LOAD_CASES = ("swish", "gelu", "softmax", "sum_dim")  # what the loaded pool's other lanes verify, round robin


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


# -- on the GPU ----------------------------------------------------------------------------------------------------


def _import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _to_cuda(x):
    import torch

    return x.cuda() if isinstance(x, torch.Tensor) else x


def _outputs_match(a, b) -> bool:
    import torch

    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    return len(a) == len(b) and all(torch.allclose(x.float(), y.float(), atol=1e-2, rtol=1e-2) for x, y in zip(a, b))


def _models(case: Case, task, workdir: Path) -> tuple:
    """(reference, candidate, inputs) on the GPU, built as the docstring says."""
    import torch

    from kernelzero.tasks.module import exec_module

    ref_mod = exec_module(task.source, task.sizes, workdir / f"{case.id}_reference.py", name=f"kz_panel_ref_{case.id}")
    cand_path = workdir / f"{case.id}_candidate.py"
    cand_path.write_text((HERE / case.candidate).read_text())
    cand_mod = _import_file(cand_path, f"kz_panel_cand_{case.id}")
    torch.manual_seed(SEED)
    init = ref_mod.get_init_inputs()
    torch.manual_seed(SEED)
    ref = ref_mod.Model(*init).cuda().eval()
    torch.manual_seed(SEED)
    new = cand_mod.ModelNew(*init).cuda().eval()
    torch.manual_seed(SEED + 1)
    return ref, new, [_to_cuda(x) for x in ref_mod.get_inputs()]


def _timed(ref, new, inputs: list, rounds: int) -> tuple[float, float, bool]:
    import torch
    from triton.testing import do_bench

    from kernelzero.verify.judge.lease import exclusive_gpu

    def run_ref():
        return ref(*inputs)

    def run_new():
        return new(*inputs)

    times: dict[str, list[float]] = {"cand": [], "ref": []}
    with torch.no_grad():
        match = _outputs_match(run_new(), run_ref())
        torch.cuda.synchronize()
        with exclusive_gpu():  # no verification is timed meanwhile, as the judge's own timing holds it
            for _ in range(rounds):
                times["ref"].append(do_bench(run_ref, warmup=50, rep=200, return_mode="median"))
                times["cand"].append(do_bench(run_new, warmup=50, rep=200, return_mode="median"))
    return statistics.median(times["cand"]), statistics.median(times["ref"]), match


def do_bench_case(case: Case, task, workdir: Path, rounds: int = 3) -> tuple[float, float, bool]:
    """(candidate ms, reference ms, outputs match) by do_bench, both models in this process (see the docstring)."""
    import torch

    models = _models(case, task, workdir)
    try:
        return _timed(*models, rounds)
    finally:
        models = None  # the models and inputs go before the verifications lease GPU memory
        torch.cuda.empty_cache()


def prebuild_cuda(case: Case) -> None:
    """Build a CUDA candidate's extensions into the shared build cache once (what the pool's build stage does), so
    each fresh verification and this process only load them."""
    from kernelzero.verify import options_for
    from kernelzero.verify.backends.cuda.build import prebuild
    from kernelzero.verify.backends.cuda.build_cache import BuildCache, default_cache_dir, ensure_readable
    from kernelzero.verify.sandbox.process import plan_for

    opts = options_for(device="cuda")
    cache = BuildCache(ensure_readable(default_cache_dir()))
    results = prebuild((HERE / case.candidate).read_text(), cache, timeout_s=600, sandbox=plan_for(opts))
    print(f"  {case.id}: prebuilt {[(r.ok, r.cached) for r in results]}", flush=True)


def run_record(case: Case, phase: str, verdict, seconds: float) -> dict:
    """One verification as the JSON-lines file keeps it."""
    timing, ref = verdict.timing, verdict.ref_eager
    return {
        "case": case.id,
        "phase": phase,
        "status": verdict.status,
        "speedup": verdict.speedup_eager,
        "cand_ms": timing.median_ms if timing else None,
        "ref_ms": ref.median_ms if ref else None,
        "timing_check": verdict.timing_check[:120],
        "message": verdict.message[:300],
        "seconds": round(seconds, 1),
    }


class Clock:
    """The budget: a deadline, and the mean wall time of a verification so far (to decide what still fits)."""

    def __init__(self, budget_s: float):
        self.deadline = time.monotonic() + budget_s
        self.seconds: list[float] = []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def per_verification(self) -> float:
        return statistics.mean(self.seconds) if self.seconds else 30.0

    def fits(self, n_verifications: float, extra_s: float = 0.0) -> bool:
        return self.left() > n_verifications * self.per_verification() + extra_s


def kz_runs(case: Case, task, n: int, clock: Clock, log, standby) -> list[dict]:
    from kernelzero.verify import options_for, verify

    source = (HERE / case.candidate).read_text()
    runs = []
    for i in range(n):
        if not clock.fits(1.2):
            print(f"  {case.id}: budget: stopping after {i} of {n} runs", flush=True)
            break
        start = time.monotonic()
        v = verify(task, source, case.backend, options_for(device="cuda"), standby=standby)
        clock.seconds.append(time.monotonic() - start)
        runs.append(log(run_record(case, "kz", v, clock.seconds[-1])))
        print(
            f"  {case.id} run {i + 1}/{n}: {v.status} speedup {v.speedup_eager} cand {runs[-1]['cand_ms']} ms "
            f"ref {runs[-1]['ref_ms']} ms ({clock.seconds[-1]:.0f} s) {v.message[:120]}",
            flush=True,
        )
    return runs


def loaded_runs(case: Case, task, load: list, n: int, jobs: int, clock: Clock, log) -> list[dict]:
    """The case verified `n` times through a LocalPool whose `jobs` other lanes keep verifying `load` meanwhile."""
    from kernelzero.service.pool import LocalPool, VerifyRequest
    from kernelzero.verify import options_for

    opts = options_for(device="cuda")
    pool = LocalPool(per_gpu=jobs + 1, build_jobs=1)
    requests = [VerifyRequest(t, (HERE / c.candidate).read_text(), c.backend, opts) for c, t in load]
    stop = threading.Event()

    def lane(k: int) -> None:
        while not stop.is_set():
            v = pool.run_one(requests[k % len(requests)])
            print(f"    load lane {k % jobs}: {v.task} {v.status}", flush=True)
            k += jobs

    lanes = [threading.Thread(target=lane, args=(k,), daemon=True) for k in range(jobs)]
    for t in lanes:
        t.start()
    runs = []
    try:
        mine = VerifyRequest(task, (HERE / case.candidate).read_text(), case.backend, opts)
        for i in range(n):
            if not clock.fits(3.0):  # a loaded run is slower, and the lanes must drain after it
                print(f"  {case.id}: budget: {i} of {n} loaded runs", flush=True)
                break
            start = time.monotonic()
            v = pool.run_one(mine)
            runs.append(log(run_record(case, "loaded", v, time.monotonic() - start)))
            print(
                f"  {case.id} loaded run {i + 1}/{n}: {v.status} speedup {v.speedup_eager} "
                f"({runs[-1]['seconds']:.0f} s) {v.message[:120]}",
                flush=True,
            )
    finally:
        stop.set()
        for t in lanes:
            t.join()
        pool.standby.close()
    return runs


def _commit() -> str:
    if os.environ.get("KZ_GIT_COMMIT"):
        return os.environ["KZ_GIT_COMMIT"]
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_case(case: Case, task, args, clock: Clock, load: list, log, standby, workdir: Path) -> str:
    """Measure one case; its markdown row."""
    notes = []
    if case.backend == "cuda":
        prebuild_cuda(case)
    cand_ms, ref_ms, match = do_bench_case(case, task, workdir)
    print(
        f"  {case.id}: do_bench cand {cand_ms:.4f} ms ref {ref_ms:.4f} ms speedup {ref_ms / cand_ms:.3f} "
        f"(outputs {'match' if match else 'DIFFER'})",
        flush=True,
    )
    if not match:
        notes.append("do_bench outputs differ from the reference (atol=rtol=1e-2)")
    runs = kz_runs(case, task, args.repeats, clock, log, standby)
    loaded = (
        loaded_runs(case, task, load, args.loaded_repeats, args.load_jobs, clock, log) if args.loaded_repeats else []
    )
    for phase, recs, want in (("runs", runs, args.repeats), ("loaded runs", loaded, args.loaded_repeats)):
        bad = [r["status"] for r in recs if not r["speedup"]]
        if bad:
            notes.append(f"{phase} without a speedup: {', '.join(bad)}")
        if len(recs) < want:
            notes.append(f"{len(recs)} of {want} {phase} (budget)")
    return format_row(case, (cand_ms, ref_ms), runs, loaded, notes)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="KernelBench's problems (.jsonl), e.g. .gpu/kernelbench.jsonl on the GPU machine")
    p.add_argument("--out", type=Path, help="markdown table, written row by row (runs go to the same name .jsonl)")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop starting work past this many seconds")
    p.add_argument("--cases", default="", help="comma-separated case ids (default: all, in order)")
    p.add_argument("--repeats", type=int, default=5, help="fresh verifications per case")
    p.add_argument("--loaded-repeats", type=int, default=2, help="verifications inside the loaded pool (0: none)")
    p.add_argument("--load-jobs", type=int, default=4, help="pool lanes verifying other kernels meanwhile")
    p.add_argument("--standby", action="store_true", help="start each run's judge ahead (as the pool does)")
    p.add_argument("--dry-run", action="store_true", help="CPU: load and check every case, print the plan, run nothing")
    args = p.parse_args(argv)
    start = time.monotonic()
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
    return measure(args, cases, tasks, start)


def measure(args, cases: list[Case], tasks: dict, start: float) -> int:
    import torch
    import triton

    from kernelzero.verify.backends.cuda.build_cache import default_cache_dir, ensure_readable
    from kernelzero.verify.backends.cuda.hook import install_cache_hook
    from kernelzero.verify.judge.standby import Standby

    clock = Clock(args.budget_s - (time.monotonic() - start))
    workdir = Path(tempfile.mkdtemp(prefix="kz-panel-"))
    install_cache_hook(ensure_readable(default_cache_dir()), workdir / "ext")  # CUDA candidates load prebuilt here
    load_tasks, _ = plan(args.dataset, pick(",".join(LOAD_CASES)))
    load = [(c, load_tasks[c.id]) for c in pick(",".join(LOAD_CASES))]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (
        f"Timing fidelity panel, {stamp}, commit {_commit()}, {torch.cuda.get_device_name()}, torch "
        f"{torch.__version__}, Triton {triton.__version__}; repeats {args.repeats}, loaded repeats "
        f"{args.loaded_repeats} with {args.load_jobs} load lanes, standby {args.standby}, budget {args.budget_s:g} s"
    )
    out = args.out
    jsonl = out.with_suffix(".jsonl") if out else None
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(head + "\n\n" + HEADER + "\n")
        jsonl.write_text("")

    def log(record: dict) -> dict:
        if jsonl:
            with jsonl.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
        return record

    standby = Standby(1) if args.standby else None
    skipped = []
    try:
        for case in cases:
            build_s = 90.0 if case.backend == "cuda" else 0.0
            if not clock.fits(1.5, 20.0 + build_s):
                skipped.append(case.id)
                print(
                    f"timing_panel: skipping {case.id}: {clock.left():.0f} s left, a run takes "
                    f"~{clock.per_verification():.0f} s",
                    flush=True,
                )
                continue
            print(
                f"timing_panel: {case.id} ({case.task}, ~{case.expected_us:g} us), {clock.left():.0f} s left",
                flush=True,
            )
            try:
                row = run_case(case, tasks[case.id], args, clock, load, log, standby, workdir)
            except Exception as exc:  # one case's failure (a build, an OOM in do_bench) must not cost the others
                row = f"| {case.id} | {case.backend} | {case.task} | failed: {type(exc).__name__}: {str(exc)[:200]} |"
            print(row, flush=True)
            if out:
                with out.open("a") as fh:
                    fh.write(row + "\n")
    finally:
        if standby:
            standby.close()
    tail = f"\nNot run (budget): {', '.join(skipped)}.\n" if skipped else ""
    print(f"timing_panel: done in {time.monotonic() - start:.0f} s.{tail}", flush=True)
    if out and tail:
        with out.open("a") as fh:
            fh.write(tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())

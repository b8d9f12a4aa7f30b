"""The timing fidelity panel's GPU side (bench/timing_panel.py says what is measured and how to run it).

Two phases in one call, both inside --budget-s:
1. unloaded, case by case: the CUDA candidate's extensions built once into the shared build cache (what the pool's
   build stage does), do_bench on both models in this process, then --repeats fresh verifications, --parallel of
   them at a time (default 1: one after the other; more overlap their builds, loads and correctness checks while
   each one's timing still holds the GPU alone); the case's row is appended to --out at once (its loaded cells say
   "pending").
2. loaded: every case of phase 1 verified --loaded-repeats more times through one `LocalPool` of --pool-per-gpu
   lanes on the GPU; a lane with no measured verification left verifies the load cases (LOAD_CASES) until the
   last measured one is done, so the pool stays full to the end. The table is then written again whole, with the
   loaded column filled. Time for phase 2 (--loaded-s) is kept back from phase 1.
Every verification's record goes to the `.jsonl` beside --out as it finishes.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import timing_panel as tp
from gpu_clocks import Clocks

ROOT = tp.ROOT


@dataclass
class Row:
    """What one case's row is made of, kept to write the table again with the loaded column."""

    case: tp.Case
    task: object  # the Task, sizes applied
    db: tuple[float, float]  # do_bench (candidate ms, reference ms)
    runs: list[dict]  # run records of the fresh verifications
    notes: list[str]
    loaded: list[dict] = field(default_factory=list)  # run records inside the loaded pool


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


def _models(case: tp.Case, task, workdir: Path) -> tuple:
    """(reference, candidate, inputs) on the GPU: same init inputs, same seed before each model, seeded inputs."""
    import torch

    from kernelzero.tasks.module import exec_module

    ref_mod = exec_module(task.source, task.sizes, workdir / f"{case.id}_reference.py", name=f"kz_panel_ref_{case.id}")
    cand_path = workdir / f"{case.id}_candidate.py"
    cand_path.write_text((tp.HERE / case.candidate).read_text())
    cand_mod = _import_file(cand_path, f"kz_panel_cand_{case.id}")
    torch.manual_seed(tp.SEED)
    init = ref_mod.get_init_inputs()
    torch.manual_seed(tp.SEED)
    ref = ref_mod.Model(*init).cuda().eval()
    torch.manual_seed(tp.SEED)
    new = cand_mod.ModelNew(*init).cuda().eval()
    torch.manual_seed(tp.SEED + 1)
    return ref, new, [_to_cuda(x) for x in ref_mod.get_inputs()]


def _launch_us(fn, calls: int = 50) -> float:
    """Host microseconds a call's launch path takes in this process (no sandbox, no watch): the calls are queued
    behind a 10 ms GPU sleep, so the GPU never paces them."""
    import torch

    torch.cuda.synchronize()
    torch.cuda._sleep(20_000_000)
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    spent = (time.perf_counter() - began) / calls * 1e6
    torch.cuda.synchronize()
    return spent


def _timed(ref, new, inputs: list, rounds: int) -> tuple[float, float, bool]:
    import torch
    from triton.testing import do_bench

    from kernelzero.verify.judge.lease import exclusive_gpu

    run_ref, run_new = (lambda: ref(*inputs)), (lambda: new(*inputs))
    times: dict[str, list[float]] = {"cand": [], "ref": []}
    clocks = Clocks()
    with torch.no_grad():
        match = _outputs_match(run_new(), run_ref())
        torch.cuda.synchronize()
        with exclusive_gpu():  # as the judge's timing: nobody else's verification is timed meanwhile
            for _ in range(rounds):
                for side, run in (("ref", run_ref), ("cand", run_new)):  # the SM clock sampled (gpu_clocks.py)
                    bench = lambda r=run: do_bench(r, warmup=50, rep=200, return_mode="median")  # noqa: E731
                    times[side].append(clocks.during(side, bench))
            launch = f"cand {_launch_us(run_new):.1f} us, ref {_launch_us(run_ref):.1f} us"
            print(f"  launch path here: {launch}; {clocks.words()}", flush=True)
    return statistics.median(times["cand"]), statistics.median(times["ref"]), match


def do_bench_case(case: tp.Case, task, workdir: Path, rounds: int = 3) -> tuple[float, float, bool]:
    """(candidate ms, reference ms, outputs match): do_bench's medians, the median of `rounds` alternating rounds."""
    import torch

    models = _models(case, task, workdir)
    try:
        return _timed(*models, rounds)
    finally:
        models = None  # the models and inputs go before the verifications lease GPU memory
        torch.cuda.empty_cache()


def prebuild_cuda(case: tp.Case) -> None:
    """Build a CUDA candidate's extensions into the shared build cache, so each verification (and this process,
    through the cache hook `measure` installs) only loads them, as in the pool."""
    from kernelzero.verify import options_for
    from kernelzero.verify.backends.cuda.build import prebuild
    from kernelzero.verify.backends.cuda.build_cache import BuildCache, default_cache_dir, ensure_readable
    from kernelzero.verify.sandbox.process import plan_for

    cache = BuildCache(ensure_readable(default_cache_dir()))
    source = (tp.HERE / case.candidate).read_text()
    results = prebuild(source, cache, timeout_s=600, sandbox=plan_for(options_for(device="cuda")))
    print(f"  {case.id}: extensions {[(r.ok, 'cached' if r.cached else 'built') for r in results]}", flush=True)


def _notes(notes: list[str]) -> list[str]:
    """A verdict's first four notes, and any later one about the judge's floor (why it had none)."""
    return [n[:160] for n in notes[:4]] + [n[:240] for n in notes[4:] if "floor" in n][:2]


def run_record(case: tp.Case, phase: str, verdict, seconds: float) -> dict:
    """One verification as the JSON-lines file keeps it."""
    timing, ref = verdict.timing, verdict.ref_eager
    return {
        "case": case.id,
        "phase": phase,
        "status": verdict.status,
        "speedup": verdict.speedup_eager,
        "cand_ms": timing.median_ms if timing else None,
        "ref_ms": ref.median_ms if ref else None,
        "calls": getattr(timing, "calls", None),
        "cand_p10_p90_ms": [getattr(timing, "p10_ms", None), getattr(timing, "p90_ms", None)],
        "ref_p10_p90_ms": [getattr(ref, "p10_ms", None), getattr(ref, "p90_ms", None)],
        "split": {
            k: v
            for k, v in (getattr(verdict, "stage_seconds", None) or {}).items()
            if k.startswith(("call_", "floor_", "block_stage"))
        },
        "timing_check": verdict.timing_check[:300],
        "notes": _notes([str(n) for n in (getattr(verdict, "notes", None) or ())]),
        "message": verdict.message[:300],
        "seconds": round(seconds, 1),
    }


class Clock:
    """The budget: a deadline, and the mean wall time of one verification so far (to decide what still fits)."""

    def __init__(self, budget_s: float):
        self.deadline = time.monotonic() + budget_s
        self.seconds: list[float] = []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def per_verification(self) -> float:
        return statistics.mean(self.seconds) if self.seconds else 30.0

    def fits(self, verifications: float, extra_s: float = 0.0) -> bool:
        return self.left() > verifications * self.per_verification() + extra_s


def unloaded_case(case: tp.Case, task, args, clock: Clock, log, reserve_s: float, workdir: Path) -> Row:
    """Phase 1 for one case: build (CUDA), do_bench, then up to --repeats fresh verifications."""
    from kernelzero.verify import options_for, verify

    if case.backend == "cuda":
        prebuild_cuda(case)
    cand_ms, ref_ms, match = do_bench_case(case, task, workdir)
    print(
        f"  {case.id}: do_bench cand {cand_ms:.4f} ms ref {ref_ms:.4f} ms, speedup {ref_ms / cand_ms:.3f}", flush=True
    )
    notes = [] if match else ["do_bench: outputs differ from the reference's (atol=rtol=1e-2)"]
    source, runs, raised = (tp.HERE / case.candidate).read_text(), [], []

    def one(i: int) -> None:
        start = time.monotonic()
        try:
            v = verify(task, source, case.backend, options_for(args.profile, device="cuda"))
        except Exception as exc:  # raised again below, in the case's own thread: the case's row says it failed
            raised.append(exc)
            return
        seconds = time.monotonic() - start
        clock.seconds.append(seconds / max(1, args.parallel))  # the budget's cost of one run, at this concurrency
        r = log(run_record(case, "kz", v, seconds))
        runs.append(r)
        print(
            f"  {case.id} run {i + 1}/{args.repeats}: {v.status} speedup {v.speedup_eager} cand {r['cand_ms']} ms "
            f"ref {r['ref_ms']} ms ({r['seconds']:.0f} s) {v.message[:120]}",
            flush=True,
        )

    done = 0
    while done < args.repeats and clock.fits(1.2, reserve_s):  # --parallel fresh verifications at a time
        batch = range(done, min(args.repeats, done + max(1, args.parallel)))
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in batch]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if raised:
            raise raised[0]
        done = batch.stop
    return Row(case, task, (cand_ms, ref_ms), runs, notes)


def loaded_phase(rows: list[Row], args, clock: Clock, log) -> None:
    """Phase 2: each row's case verified --loaded-repeats times inside one full LocalPool (see the docstring)."""
    from kernelzero.service.pool import LocalPool, VerifyRequest
    from kernelzero.verify import options_for

    opts = options_for(args.profile, device="cuda")
    pool = LocalPool(per_gpu=args.pool_per_gpu, build_jobs=1)
    todo: queue.Queue = queue.Queue()
    for _ in range(args.loaded_repeats):
        for row in rows:
            todo.put(row)
    load_cases = tp.pick(",".join(tp.LOAD_CASES))
    load_tasks, _ = tp.plan(args.dataset, load_cases)
    fillers = [
        VerifyRequest(load_tasks[c.id], (tp.HERE / c.candidate).read_text(), c.backend, opts) for c in load_cases
    ]
    left = [todo.qsize()]
    lock = threading.Lock()

    def lane(k: int) -> None:
        while True:
            with lock:
                if left[0] == 0:
                    return
            try:
                row = todo.get_nowait()
            except queue.Empty:  # nothing measured left to start: keep the pool full until the last one is done
                if clock.left() < clock.per_verification():  # past this, a filler would outlive the call
                    time.sleep(1.0)
                    continue
                v = pool.run_one(fillers[k % len(fillers)])
                print(f"    load lane {k % args.pool_per_gpu}: {v.task} {v.status}", flush=True)
                k += args.pool_per_gpu
                continue
            try:  # the count goes down whatever happens, so the other lanes always stop
                if clock.fits(3.0):  # loaded runs take longer; else dropped (the row says how many it got)
                    start = time.monotonic()
                    mine = VerifyRequest(row.task, (tp.HERE / row.case.candidate).read_text(), row.case.backend, opts)
                    v = pool.run_one(mine)
                    row.loaded.append(log(run_record(row.case, "loaded", v, time.monotonic() - start)))
                    print(f"  {row.case.id} loaded: {v.status} speedup {v.speedup_eager} {v.message[:100]}", flush=True)
            finally:
                with lock:
                    left[0] -= 1

    lanes = [threading.Thread(target=lane, args=(k,), daemon=True) for k in range(args.pool_per_gpu)]
    for t in lanes:
        t.start()
    try:
        for t in lanes:
            t.join()
    finally:
        pool.standby.close()


def _commit() -> str:
    import os

    if os.environ.get("KZ_GIT_COMMIT"):
        return os.environ["KZ_GIT_COMMIT"]
    try:
        run = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
        return run.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _line(item: Row | str, args, final: bool) -> str:
    if isinstance(item, str):
        return item
    notes = list(item.notes)
    for phase, recs, want in (("runs", item.runs, args.repeats), ("loaded runs", item.loaded, args.loaded_repeats)):
        bad = [r["status"] for r in recs if not r["speedup"]]
        if bad:
            notes.append(f"{phase} without a speedup: {', '.join(bad)}")
        if (final or phase == "runs") and len(recs) < want:
            notes.append(f"{len(recs)} of {want} {phase} (budget)")
    if not final and args.loaded_repeats:
        notes.append("loaded: pending")
    return tp.format_row(item.case, item.db, item.runs, item.loaded, notes)


def measure(args, cases: list[tp.Case], tasks: dict, start: float) -> int:
    """Both phases; the table at --out (written as it goes, then whole); 0."""
    import torch
    import triton

    from kernelzero.verify.backends.cuda.build_cache import default_cache_dir, ensure_readable
    from kernelzero.verify.backends.cuda.hook import install_cache_hook

    clock = Clock(args.budget_s - (time.monotonic() - start))
    workdir = Path(tempfile.mkdtemp(prefix="kz-panel-"))
    install_cache_hook(ensure_readable(default_cache_dir()), workdir / "ext")  # CUDA candidates load the prebuilt
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (
        f"Timing fidelity panel, {stamp}, commit {_commit()}, {torch.cuda.get_device_name()}, torch "
        f"{torch.__version__}, Triton {triton.__version__}; profile {args.profile}, {args.repeats} fresh runs a case "
        f"({args.parallel} at a time), {args.loaded_repeats} "
        f"in a pool of {args.pool_per_gpu} lanes, budget {args.budget_s:g} s\n\n{tp.HEADER}\n"
    )
    jsonl = args.out.with_suffix(".jsonl") if args.out else None
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(head)
        jsonl.write_text("")

    def log(record: dict) -> dict:
        if jsonl:
            with jsonl.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
        return record

    def emit(text: str) -> None:
        print(text, flush=True)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(text + "\n")

    reserve = args.loaded_s if args.loaded_repeats else 0.0
    items: list[Row | str] = []
    skipped = []
    for case in cases:
        if not clock.fits(1.5, 20.0 + (90.0 if case.backend == "cuda" else 0.0) + reserve):
            skipped.append(case.id)
            print(
                f"timing_panel: skipping {case.id}: {clock.left():.0f} s left, {reserve:g} s kept for phase 2",
                flush=True,
            )
            continue
        print(f"timing_panel: {case.id} ({case.task}, ~{case.expected_us:g} us), {clock.left():.0f} s left", flush=True)
        try:
            item = unloaded_case(case, tasks[case.id], args, clock, log, reserve, workdir)
        except Exception as exc:  # one case's failure (a build, do_bench out of memory) must not cost the others
            why = " ".join(str(exc).split())[:200].replace("|", "/")  # one line: a build log must not break the table
            item = f"| {case.id} | {case.backend} | {case.task} | failed: {type(exc).__name__}: {why} |"
        items.append(item)
        emit(_line(item, args, final=False))
    rows = [i for i in items if isinstance(i, Row) and i.runs]
    if args.loaded_repeats and rows:
        print(
            f"timing_panel: loaded pool, {len(rows)} case(s) x {args.loaded_repeats}, {clock.left():.0f} s left",
            flush=True,
        )
        loaded_phase(rows, args, clock, log)
    tail = f"\nNot run (budget): {', '.join(skipped)}.\n" if skipped else ""
    if args.out:
        args.out.write_text(head + "".join(_line(i, args, final=True) + "\n" for i in items) + tail)
    print("\n".join(_line(i, args, final=True) for i in items) + tail, flush=True)
    print(f"timing_panel: done in {time.monotonic() - start:.0f} s", flush=True)
    return 0

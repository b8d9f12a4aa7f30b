"""A deliberately naive, KernelBench-style harness: the yardstick that proves a cheat is a real cheat.

It does what an in-process evaluator of the KernelBench family does, on purpose, so that each
fixture under tests/kernels/cheat/ can show it fools such a harness before the hardened verifier
is asked to reject it:

- the task module is executed as a module named `reference` (registered in `sys.modules`) and the
  candidate is then executed into *the same globals dict* (KernelBench's CUDA path `exec`s both
  into one context), so the candidate sees `Model`, `F`, the size globals ...;
- `Model` and `ModelNew` are built under `torch.manual_seed(42)` with `get_init_inputs()`;
- `calls` correctness calls, each on inputs from `get_inputs()` after `torch.manual_seed(42 + k)`
  (all drawn up front and kept alive), the reference first (or the candidate first, as Kevin's
  evaluation did, with `candidate_first`), under `torch.no_grad()`, each call in its own function
  scope (its tensors are freed when it returns); the check is
  `torch.allclose(ref, out, atol=1e-2, rtol=1e-2)` on the device, on matching shapes;
- then a few unchecked "timed" calls on the first input set, outside `no_grad` (KernelBench times
  with grad enabled and never checks timed outputs); on a GPU they are timed with CUDA events on
  the current stream;
- pass = the child exits with status 0 (a harness that trusts its exit code); the reason is the
  last `RESULT:` line it printed.

On a GPU, a candidate's `load_inline` calls are built the way the verification pool builds them: captured and built
into the shared build cache first (`prebuild`, verify/backends/cuda/build.py), then loaded from it in the child
(`install_cache_hook`). The library is the one torch's own build would make (build.py lists what its recipe
changes and why the meaning stays), so what the harness checks is unchanged; the build takes a fraction of torch's
time (precompiled headers) and is shared with the verifier's test of the same cheat, whose worker finds it in the
cache. (Torch's own build took 66-83 s per CUDA cheat in the GPU gate at a451387, H200, 2026-12-04.)

Everything runs in a fresh child process per candidate (a cheat may patch torch, walk frames or
call `os._exit`). On CPU, Triton runs in its interpreter: `TRITON_INTERPRET=1` is set in the
child's environment, before triton is imported.

    from naive_harness import run_naive
    result = run_naive(task, source)           # task: a kernelzero Task, already resized
    result.passed, result.reason, result.seconds

    python tests/verify/naive_harness.py TASK_KEY CANDIDATE.py [--candidate-first] [--device cuda]
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ATOL = RTOL = 1e-2
SEED = 42


@dataclass(frozen=True)
class NaiveResult:
    """What the naive harness concluded about one candidate."""

    passed: bool  # the child exited 0: the naive harness accepts the candidate
    reason: str  # the last RESULT line, or why the child failed
    seconds: float  # wall time of the child
    log: str = ""  # tail of the child's stdout + stderr


def _gpu_memory(device: str):
    """A GPU memory lease (verify/judge/memory.py) for the naive harness's child on a GPU: one CUDA context and 2 GB
    at smoke sizes (this process takes a context too, to read the GPU's uuid); nothing on a CPU."""
    if device == "cpu":
        return contextlib.nullcontext()
    from kernelzero.verify.judge.memory import CONTEXT_BYTES, GIB, current_gpu_lease

    return current_gpu_lease(2 * GIB, None, base=2 * CONTEXT_BYTES)  # the child's context and this process's


def _prebuild(source: str, device: str) -> str | None:
    """The shared build cache with `source`'s `load_inline` extensions built into it (the pool's `prebuild`), or
    None on a CPU or for a source without `load_inline`. A build that fails leaves nothing there: the child's
    `load_inline` then builds privately and fails as torch's would. Where the pool's build cannot run at all (no
    CUDA toolkit torch can find), None too, said on stderr: the child builds with torch's own `load_inline`."""
    if device == "cpu" or "load_inline" not in source:
        return None
    from kernelzero.verify.backends.cuda.build import prebuild
    from kernelzero.verify.backends.cuda.build_cache import BuildCache, default_cache_dir, ensure_readable

    try:
        root = ensure_readable(default_cache_dir())
        prebuild(source, BuildCache(root))
    except OSError as exc:
        print(f"naive harness: the pool's build is unavailable ({exc}); torch's load_inline builds", file=sys.stderr)
        return None
    return str(root)


def run_naive(
    task,
    source: str,
    *,
    candidate_first: bool = False,
    calls: int = 3,
    timed_calls: int = 3,
    device: str = "cpu",
    timeout_s: float = 300.0,
) -> NaiveResult:
    """Run `source` against `task` (a kernelzero Task, sizes applied) in a fresh child process."""

    build_cache = _prebuild(source, device)
    with tempfile.TemporaryDirectory(prefix="kz-naive-") as tmp:
        request = Path(tmp, "request.json")
        request.write_text(
            json.dumps(
                {
                    "task_source": task.source,
                    "sizes": dict(task.sizes),
                    "source": source,
                    "candidate_first": candidate_first,
                    "calls": calls,
                    "timed_calls": timed_calls,
                    "device": device,
                    "build_cache": build_cache,
                }
            )
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        env.pop("TRITON_INTERPRET", None)
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        start = time.monotonic()
        try:
            with _gpu_memory(device):  # the GPU gate runs this beside verifications: it takes its share too
                proc = subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--child", str(request)],
                    cwd=tmp,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=timeout_s,
                    start_new_session=True,
                )
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
            return NaiveResult(False, f"timeout after {timeout_s:.0f} s", time.monotonic() - start, out[-3000:])
        seconds = time.monotonic() - start
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    results = [line for line in out.splitlines() if line.startswith("RESULT:")]
    reason = results[-1][len("RESULT:") :].strip() if results else f"exit {proc.returncode}, no RESULT line"
    if proc.returncode != 0 and not results:
        reason = f"exit {proc.returncode}: " + (err.strip().splitlines() or ["(no stderr)"])[-1][:300]
    return NaiveResult(proc.returncode == 0, reason, seconds, (out + err)[-3000:])


# --------------------------------------------------------------------------------------------------
# The child: everything below runs in the fresh process, beside the candidate.


def _child(request_path: str) -> int:
    import ast
    import types

    import torch

    from kernelzero.tasks.sizes import apply_sizes

    req = json.loads(Path(request_path).read_text())
    device = req["device"]

    def fail(msg: str) -> int:
        print(f"RESULT: fail: {msg}", flush=True)
        return 1

    # The reference, as a module named `reference`; the candidate runs in the same globals dict.
    task_path = Path("reference.py")
    task_path.write_text(req["task_source"])
    module = types.ModuleType("reference")
    module.__file__ = str(task_path.resolve())
    sys.modules["reference"] = module
    tree = apply_sizes(ast.parse(req["task_source"]), req["sizes"])
    exec(compile(tree, module.__file__, "exec"), module.__dict__)
    ns = module.__dict__

    torch.manual_seed(SEED)
    init_inputs = ns["get_init_inputs"]()
    torch.manual_seed(SEED)
    model = ns["Model"](*init_inputs).to(device)

    if req.get("build_cache"):  # a GPU run: load_inline loads what run_naive built (module docstring)
        from kernelzero.verify.backends.cuda.hook import install_cache_hook

        install_cache_hook(req["build_cache"], Path("private_builds").resolve())
    cand_path = Path("candidate.py").resolve()  # a real file: triton.jit reads the kernels' source back
    cand_path.write_text(req["source"])
    try:
        exec(compile(req["source"], str(cand_path), "exec"), ns)
        torch.manual_seed(SEED)
        model_new = ns["ModelNew"](*init_inputs).to(device)
    except Exception as exc:  # noqa: BLE001
        return fail(f"load: {type(exc).__name__}: {exc}")

    def draw(k: int) -> list:
        torch.manual_seed(SEED + k)
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]

    def sync() -> None:
        if device != "cpu":
            torch.cuda.synchronize()

    def check(k: int, inputs: list) -> str:
        """'' when call k matches; its own scope, so every tensor of the call is freed on return."""
        with torch.no_grad():
            if req["candidate_first"]:
                out = model_new(*inputs)
                ref = model(*inputs)
            else:
                ref = model(*inputs)
                out = model_new(*inputs)
        sync()
        out = out[0] if isinstance(out, (tuple, list)) else out
        ref = ref[0] if isinstance(ref, (tuple, list)) else ref
        if not isinstance(out, torch.Tensor):
            return f"call {k}: forward returned {type(out).__name__}"
        if tuple(out.shape) != tuple(ref.shape):
            return f"call {k}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        if not torch.allclose(ref, out, atol=ATOL, rtol=RTOL):
            return f"call {k}: values differ (max abs err {float((ref - out).abs().max()):.3g})"
        return ""

    all_inputs = [draw(k) for k in range(req["calls"])]
    for k, inputs in enumerate(all_inputs):
        try:
            problem = check(k, inputs)
        except Exception as exc:  # noqa: BLE001
            problem = f"call {k}: {type(exc).__name__}: {exc}"
        if problem:
            return fail(problem)

    # "Timing": unchecked calls on the first input set, grad enabled (as KernelBench times).
    times = []
    try:
        for _ in range(2):
            model_new(*all_inputs[0])
        sync()
        for _ in range(req["timed_calls"]):
            if device == "cpu":
                t0 = time.perf_counter()
                model_new(*all_inputs[0])
                times.append((time.perf_counter() - t0) * 1e3)
            else:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model_new(*all_inputs[0])
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
    except Exception as exc:  # noqa: BLE001
        return fail(f"timing: {type(exc).__name__}: {exc}")
    mean = sum(times) / len(times) if times else 0.0
    print(
        f"RESULT: pass: {req['calls']} calls matched at atol=rtol={ATOL:g}; mean timed call {mean:.3f} ms", flush=True
    )
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        return _child(argv[1])
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("task", help="SUITE:NAME, e.g. kz-basic:level1/21_GELU")
    parser.add_argument("candidate", type=Path)
    parser.add_argument("--candidate-first", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--preset", default="smoke")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from fixtures import load_task

    from kernelzero.tasks import resize

    task = load_task(args.task)
    if args.preset:
        task = resize(task, preset=args.preset)
    result = run_naive(task, args.candidate.read_text(), candidate_first=args.candidate_first, device=args.device)
    print(("PASS" if result.passed else "FAIL") + f" ({result.seconds:.1f} s): {result.reason}")
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

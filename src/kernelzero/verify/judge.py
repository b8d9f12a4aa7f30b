"""The trusted side of one verification: reference, inputs, expected outputs, comparison, verdict.

`judge(task, source, backend, opts)` runs in a process that never imports candidate code: it
builds the reference `Model`, draws inputs from a secret seed, computes the expected outputs, starts
the candidate's worker in the sandbox, sends it copies of the inputs, compares what comes back and
times both sides. `python -m kernelzero.verify.judge REQUEST.json RESULT.json` runs it as a child
of `verify()`, so a crash of the reference or of torch cannot take the caller down.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import platform
import secrets
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from kernelzero.tasks.hashing import task_hash
from kernelzero.tasks.module import ContractError, load_reference
from kernelzero.tasks.quality import degenerate_reasons, flatten_outputs
from kernelzero.types import Task, Verdict, from_dict, to_dict
from kernelzero.verify.compare import compare, same_inputs
from kernelzero.verify.feedback import feedback_for
from kernelzero.verify.options import VerifyOptions, tolerances
from kernelzero.verify.sandbox import StartedWorker, WorkerDied, WorkerProcess, make_non_dumpable, start_worker

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        pass
    return out


def candidate_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class Judge:
    """One verification; `run()` returns the Verdict."""

    def __init__(self, task: Task, source: str, backend: str, opts: VerifyOptions):
        self.task, self.source, self.backend, self.opts = task, source, backend, opts
        cuda = torch.cuda.is_available() and opts.device in ("auto", "cuda")
        if opts.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' asked for, but no CUDA GPU is visible")
        self.device = "cuda" if cuda else "cpu"
        self.device_name = torch.cuda.get_device_name() if cuda else "cpu"
        self.atol, self.rtol = tolerances(opts, task.atol, task.rtol)
        self.seed = opts.seed if opts.seed is not None else secrets.randbits(62)
        self.stage_s: dict[str, float] = {}
        self.notes: list[str] = []
        self.fields: dict = {}
        self.deferred: list | None = None  # workers to close after the verdict is written (run)

    # -- verdict helpers -------------------------------------------------------------------------
    def verdict(self, status: str, stage: str, message: str = "", **extra) -> Verdict:
        base = dict(
            status=status,
            task=self.task.name,
            task_hash=task_hash(self.task),
            candidate_hash=candidate_hash(self.source),
            backend=self.backend,
            profile=self.opts.profile,
            device=self.device_name,
            stage=stage,
            message=message,
            atol=self.atol,
            rtol=self.rtol,
            precision=self.opts.precision,
            notes=tuple(self.notes),
            stage_seconds=dict(self.stage_s),
            versions=versions(),
        )
        base.update(self.fields)
        base.update(extra)
        base.pop("stage_hint", None)
        base["policy"] = self.opts.policy
        base.setdefault("policy_status", {p: status for p in ("strict", "kernelbench")})
        verdict = Verdict(**base)
        return Verdict(**{**base, "feedback": feedback_for(verdict)})

    def _timed(self, stage: str, start: float) -> None:
        self.stage_s[stage] = round(self.stage_s.get(stage, 0.0) + time.perf_counter() - start, 4)

    # -- reference side --------------------------------------------------------------------------
    def _inputs(self, seed: int) -> list:
        """One input draw, on the judge's device (the channel hands the worker copies).

        With a secret seed the draw happens on the GPU itself (seconds of CPU work less per trial at bench
        sizes); a fixed seed (the kernelbench profile) draws on the CPU, as KernelBench does, so its
        inputs are KernelBench's.
        """
        torch.manual_seed(seed)
        on_gpu = self.device == "cuda" and self.opts.seed is None
        with torch.device(self.device) if on_gpu else contextlib.nullcontext():
            raw = list(self.ref.get_inputs())
        dtype = DTYPES[self.opts.precision]
        cast = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in raw]
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in cast]

    def _on_device(self, tensors: list) -> list:
        return [t.to(self.device) for t in tensors]

    def _expected(self, inputs: list) -> list[torch.Tensor]:
        with torch.no_grad():
            if self.opts.ref_fp64:
                up = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
                outs = flatten_outputs(self.model64(*up))
                return [o.to(DTYPES[self.opts.precision]) if o.is_floating_point() else o for o in outs]
            return [o.clone() for o in flatten_outputs(self.model(*inputs))]

    def _build_reference(self, workdir: Path) -> None:
        ref = load_reference(self.task.source, self.task.sizes, workdir / "task.py")
        self.ref = ref
        torch.manual_seed(self.seed)
        self.init_inputs = list(ref.get_init_inputs())
        torch.manual_seed(self.seed)
        model = ref.model_cls(*self.init_inputs)
        self.state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model = model.to(self.device)
        if self.opts.precision != "fp32":
            model = model.to(DTYPES[self.opts.precision])
        self.model = model.train(not self.opts.eval_mode)
        if self.opts.ref_fp64:
            self.model64 = copy.deepcopy(model).double()

    # -- the run ---------------------------------------------------------------------------------
    def run(self, started: StartedWorker | None = None, deferred: list | None = None) -> Verdict:
        """Verify; `started` is a worker the launcher started while this process imported torch.

        `deferred`: when given, the launcher's worker is not closed here but appended, for the launcher to
        close once the verdict is written (its folder is the launcher's; it holds no GPU lease by then).
        """
        with (
            tempfile.TemporaryDirectory(prefix="kz-judge-") as private,
            tempfile.TemporaryDirectory(prefix="kz-cand-") as shared,
        ):
            Path(private).chmod(0o700)
            interpret = self.device == "cpu" and self.backend == "triton"
            if started is None or started.interpret != interpret:
                if started is not None:  # the launcher guessed the device wrong
                    started.worker.close()
                started = start_worker(
                    self.source,
                    Path(shared),
                    interpret=interpret,
                    user=self.opts.sandbox_user,
                    isolate_network=self.opts.isolate_network,
                    host_mem_gb=self.opts.host_mem_gb,
                )
                deferred = None  # this worker lives in this call's folder: closed here
            self.deferred = deferred
            return self._run(Path(private), started)

    def _run(self, private: Path, started: StartedWorker) -> Verdict:
        start = time.perf_counter()
        self.notes += started.plan.notes
        worker = started.worker
        try:
            if self.device == "cuda" and self.opts.cuda_ipc:
                why = worker.check_ipc() if started.ipc_why is None else started.ipc_why
                self._timed("ipc_check", start)
                if why:
                    self.notes.append(f"GPU tensors moved through host memory (CUDA IPC unavailable: {why[:200]})")
            # The candidate's import (its builds) runs before this sample takes the GPU.
            self.fields["stage_hint"] = "build"
            started_import = time.perf_counter()
            worker.send(
                {
                    "cmd": "import",
                    "path": str(started.cand_path),
                    "device": self.device,
                    "interpret": started.interpret,
                    "gpu_mem_fraction": self.opts.gpu_mem_fraction,
                }
            )
            reply, _ = worker.receive(self.opts.build_timeout_s, "importing the candidate (building its kernels)")
            self._timed("import", started_import)
            if not reply["ok"]:
                return self._failed(reply)
            self.stage_s["build"] = round(reply["build_s"], 4)
            self.notes += [f"worker: {str(n)[:300]}" for n in reply.get("notes", [])[:4]]  # its words, not ours
            if self.device != "cuda":
                return self._with_lease(private, worker, started)
            from kernelzero.verify.lease import GpuUnhealthy, gpu_lease, mark_suspect, probe_log

            torch.zeros(1, device="cuda")  # create the CUDA context before taking the GPU
            try:
                with gpu_lease(shared=True) as waited:  # checks share the GPU; timing takes it alone (_timing)
                    held = self.lease_held_at = time.perf_counter()
                    self.stage_s["gpu_wait"] = round(waited, 4)
                    self.stage_s["gpu_lease_at"] = round(time.time(), 3)  # wall clock, to check leases never overlap
                    if probe_log:
                        self.notes.append(
                            f"the GPU passed a health probe after an earlier crash ({probe_log[-1][1]:.1f} s)"
                        )
                    try:
                        verdict = self._with_lease(private, worker, started)
                    except WorkerDied:
                        mark_suspect()
                        raise
                    finally:
                        self.stage_s["gpu_lease"] = round(time.perf_counter() - held, 4)
                        self.stage_s.setdefault("gpu_shared", self.stage_s["gpu_lease"])
                    if verdict.status == "crash":
                        mark_suspect()
                    return replace(verdict, stage_seconds={**verdict.stage_seconds, **self.stage_s})
            except GpuUnhealthy as exc:
                return self.verdict(
                    "crash", "gpu_health", f"the GPU failed its health probe after an earlier crash: {exc}"
                )
        except WorkerDied as exc:
            return self.verdict(
                exc.status,
                self.fields.get("stage_hint", "load"),
                str(exc),
                exit_signal=exc.exit_signal,
                exit_code=exc.exit_code,
                error_log=worker.log_tail(),
            )
        finally:
            if self.deferred is None:
                worker.close()
            else:
                self.deferred.append(worker)

    def _with_lease(self, private: Path, worker: WorkerProcess, started: StartedWorker) -> Verdict:
        start = time.perf_counter()
        try:
            self._build_reference(private)
        except ContractError as exc:
            raise ValueError(f"the task itself is broken ({exc.kind}): {exc}") from None
        self._timed("reference", start)
        return self._with_worker(worker, started.cand_path, started.interpret)

    def _with_worker(self, worker: WorkerProcess, cand_path: Path, interpret: bool) -> Verdict:
        start = time.perf_counter()
        self.fields["stage_hint"] = "init"
        worker.send(
            {
                "cmd": "load",
                "path": str(cand_path),
                "device": self.device,
                "interpret": interpret,
                "init_inputs": self.init_inputs,
                "seed": self.seed,
                "state_dict": self.state_dict,
                "dtype": self.opts.precision,
                "eval_mode": self.opts.eval_mode,
                "gpu_mem_fraction": self.opts.gpu_mem_fraction,
            }
        )
        reply, _ = worker.receive(self.opts.build_timeout_s, "constructing ModelNew")
        self._timed("load", start)
        if not reply["ok"]:
            return self._failed(reply)
        self.fields["params"] = reply["params"]
        failure = self._correctness(worker)
        if failure is not None:
            if (
                interpret
                and self.opts.compile_check
                and failure.status == "runtime_error"
                and "out-of-bounds" not in failure.message
            ):
                # The interpreter trips over what a GPU compiler rejects (a misspelt tl. name): say so.
                from kernelzero.verify.gpu_check import triton_compile_check

                compiled = triton_compile_check(self, cand_path)
                if compiled is not None and "CompilationError" in compiled.error_log:
                    return compiled
                return failure
            return failure
        if interpret and self.opts.compile_check:
            from kernelzero.verify.gpu_check import triton_compile_check

            failed = triton_compile_check(self, cand_path)
            if failed is not None:
                return failed
        return self._timing(worker)

    def _failed(self, reply: dict) -> Verdict:
        return self.verdict(reply["status"], reply["stage"], reply["message"], error_log=reply.get("log", ""))

    def _run_timeout(self) -> float:
        ref_ms = self.stage_s.get("ref_forward_ms", 0.0)
        return max(self.opts.timeout_floor_s, self.opts.timeout_scale * ref_ms / 1e3)

    def _correctness(self, worker: WorkerProcess) -> Verdict | None:
        self.fields["stage_hint"] = "correctness"
        passed = 0
        draws: list = []
        for trial in range(self.opts.trials):
            inputs = self._inputs(self.seed + 1 + trial)
            t0 = time.perf_counter()
            expected = self._expected(inputs)
            if self.device == "cuda":
                torch.cuda.synchronize()
            self.stage_s["ref_forward_ms"] = max(
                self.stage_s.get("ref_forward_ms", 0), (time.perf_counter() - t0) * 1e3
            )
            start = time.perf_counter()
            worker.send({"cmd": "run", "inputs": inputs})
            reply, tensors = worker.receive(self._run_timeout(), f"correctness trial {trial}")
            self._timed("correctness", start)
            if trial == 0:  # Triton's JIT compile happens here
                self._timed("first_call", start)
            if not reply["ok"]:
                return self._failed(reply)
            if reply.get("bf16") and "bf16" not in " ".join(self.notes):
                self.notes.append("bf16 ran in Triton's interpreter, whose bf16 arithmetic is unreliable")
            rejected = self._anticheat(reply, trial, passed)
            if rejected is not None:
                return rejected
            outs, after = tensors[: reply["n_out"]], tensors[reply["n_out"] :]
            if worker.ipc:  # the worker ran on the judge's lent copies: read them where they are
                after = worker.sink.lent
            if trial < 2:
                draws.append((expected, inputs))
            failure = compare(expected, self._on_device(outs), self.atol, self.rtol, trial)
            if failure is None:
                changed = same_inputs([x for x in inputs if isinstance(x, torch.Tensor)], self._on_device(after))
                if changed:
                    return self.verdict("input_mutated", "correctness", changed, trials=trial + 1, trials_passed=passed)
                if reply.get("output_problem"):
                    return self.verdict(
                        "bad_output", "correctness", reply["output_problem"], trials=trial + 1, trials_passed=passed
                    )
                passed += 1
                continue
            return self.verdict(
                failure.status,
                "correctness",
                f"trial {trial}: {failure.message}",
                mismatch=failure.mismatch,
                trials=trial + 1,
                trials_passed=passed,
            )
        self.fields.update(trials=self.opts.trials, trials_passed=passed)
        if len(draws) == 2:
            reasons = degenerate_reasons(draws[0][0], draws[1][0], draws[0][1], max(self.atol, 1e-6))
            if reasons:
                self.fields["task_degenerate"] = tuple(reasons)
                self.notes.append("degenerate task, a trivial answer passes: " + "; ".join(reasons))
        return None

    def _anticheat(self, reply: dict, trial: int, passed: int) -> Verdict | None:
        """The status of a call that ran but broke the rules (see guards.py); None when clean."""
        where = dict(
            trials=trial + 1,
            trials_passed=passed,
            own_kernels=reply.get("launches", {}),
            torch_ops=tuple(reply.get("torch_ops", ())),
        )
        self.fields["own_kernels"] = where["own_kernels"]
        if reply.get("tampered"):
            return self.verdict(
                "tampered", "correctness", f"the harness was tampered with ({reply['tampered']})", **where
            )
        if not reply.get("launches"):
            return self.verdict(
                "no_kernel",
                "correctness",
                f"trial {trial}: the forward launched none of the candidate's own kernels",
                **where,
            )
        ops = tuple(reply.get("torch_ops", ()))
        if ops:
            self.fields["torch_ops"] = tuple(sorted(set(self.fields.get("torch_ops", ())) | set(ops)))
        return None

    def policy_result(self, status: str, message: str) -> tuple[str, str, dict[str, str]]:
        """(status, message, status per policy) for a run that was otherwise `status`."""
        ops = self.fields.get("torch_ops", ())
        per = {"kernelbench": status, "strict": status}
        if ops and status == "correct":
            per["strict"] = "torch_compute"
        final = per[self.opts.policy]
        if final == "torch_compute":
            message = f"PyTorch compute ops ran inside forward: {', '.join(ops)} (not allowed under the strict policy)"
        return final, message, per

    def _timing(self, worker: WorkerProcess) -> Verdict:
        if self.device == "cpu" or not self.opts.time_it:
            note = "no GPU: correctness only" if self.device == "cpu" else "timing not asked for"
            status, message, per = self.policy_result("correct", "")
            return self.verdict(status, "done", message, timing_note=note, policy_status=per)
        from kernelzero.verify.lease import exclusive_gpu
        from kernelzero.verify.reference import timed_comparison

        self.stage_s["gpu_shared"] = round(time.perf_counter() - self.lease_held_at, 4)  # then it lets go to time
        with exclusive_gpu() as waited:
            held = time.perf_counter()
            self.stage_s.update(gpu_excl_wait=round(waited, 4), gpu_excl_at=round(time.time(), 3))
            try:
                return timed_comparison(self, worker)
            finally:
                self.stage_s["gpu_excl"] = round(time.perf_counter() - held, 4)


def judge_request(request: dict, started: StartedWorker | None = None, deferred: list | None = None) -> dict:
    """Run one verification request (as written by verify()); return the result payload (`deferred`: Judge.run)."""
    task = from_dict(Task, request["task"])
    opts = from_dict(VerifyOptions, request["options"])
    try:
        verdict = Judge(task, request["source"], request["backend"], opts).run(started, deferred)
        return {"verdict": to_dict(verdict)}
    except ValueError as exc:
        if started is not None:
            started.worker.close()
        return {"error": str(exc)}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    make_non_dumpable()
    Path(argv[1]).write_text(json.dumps(judge_request(request)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

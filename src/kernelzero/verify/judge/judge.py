"""The trusted side of one verification: reference, inputs, expected outputs, comparison, verdict.

`judge(task, source, backend, opts)` runs in a process that never imports candidate code: it
builds the reference `Model`, draws inputs from a secret seed, computes the expected outputs, starts
the candidate's worker in the sandbox, sends it copies of the inputs, compares what comes back and
times both sides. `python -m kernelzero.verify.judge.judge REQUEST.json RESULT.json` runs it as a child
of `verify()`, so a crash of the reference or of torch cannot take the caller down.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace
from pathlib import Path

import torch

from kernelzero.tasks.hashing import task_hash
from kernelzero.types import POLICIES, Backend, Task, Verdict, from_dict, to_dict
from kernelzero.verify.backends import BACKENDS, backend_module
from kernelzero.verify.feedback import feedback_for
from kernelzero.verify.judge import pinning, priority, usage
from kernelzero.verify.judge.anticheat import policy_result
from kernelzero.verify.judge.correctness import correctness
from kernelzero.verify.judge.faults import RetryAlone, blame_candidate_fault, reference_failed
from kernelzero.verify.judge.lease import GpuUnhealthy, exclusive_gpu, gpu_lease, mark_suspect, probe_log, probe_note
from kernelzero.verify.judge.memory import judge_memory_lease
from kernelzero.verify.judge.predraw import predraw
from kernelzero.verify.judge.reference import Reference
from kernelzero.verify.judge.solo import take_solo_reference
from kernelzero.verify.judge.task_source import TaskBroken
from kernelzero.verify.judge.timing_stage import prime_inputs, timed_comparison
from kernelzero.verify.options import VerifyOptions, tolerances
from kernelzero.verify.sandbox import cuda_ipc
from kernelzero.verify.sandbox.process import plan_for, scratch_folder
from kernelzero.verify.sandbox.worker_process import StartedWorker, WorkerDied, WorkerProcess, start_worker
from kernelzero.verify.verdicts import candidate_hash, versions


class Judge:
    """One verification; `run()` returns the Verdict."""

    def __init__(self, task: Task, source: str, backend: Backend, opts: VerifyOptions):
        self.task, self.source, self.backend, self.opts = task, source, backend, opts
        cuda = torch.cuda.is_available() and opts.device in ("auto", "cuda")
        if opts.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' asked for, but no CUDA GPU is visible")
        self.device = "cuda" if cuda else "cpu"
        self.device_name = torch.cuda.get_device_name() if cuda else "cpu"
        self.atol, self.rtol = tolerances(opts, task.atol, task.rtol)
        # Two seeds: `init_seed` initialises the parameters of both models (the candidate gets it: it is no
        # secret), `input_seed` draws every input and never leaves the judge and the reference's process. A
        # fixed seed (the kernelbench profile) makes both predictable, as in KernelBench's own protocol.
        self.init_seed = opts.seed if opts.seed is not None else secrets.randbits(62)
        self.input_seed = opts.seed if opts.seed is not None else secrets.randbits(62)
        self.ref: Reference | None = None
        self.solo_ref = None  # the reference's Timing alone, before candidate code ran (judge/solo.py)
        self.draws = 0  # input sets drawn for timing so far: each timed call gets seeds of its own
        self.one_set = None  # the kernelbench profile's one input set, drawn once (timing_stage._draw)
        self.predrawn: list = []  # input sets drawn before the exclusive window (judge/predraw.py, KZ_PREDRAW)
        self.check_seed = secrets.randbits(62)  # the recurring-input check's fresh sets (timing_stage.py)
        self.stage_s: dict[str, float] = {}
        self.notes: list[str] = []
        self.fields: dict = {}
        self.deferred: list | None = None  # workers to close after the verdict is written (run)
        self.candidate_ran = False  # the candidate's import was asked for: from then on its code may run
        self.lease_marker: str | None = None  # touched once this verification holds its memory lease (judge/run.py)

    # -- verdict helpers -------------------------------------------------------------------------
    def verdict(self, status: str, stage: str, message: str = "", **extra) -> Verdict:
        base = dict(
            status=status,
            task=self.task.name,
            task_hash=task_hash(self.task),
            candidate_hash=candidate_hash(self.source),
            backend=self.backend.name,
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
        base.setdefault("policy_status", dict.fromkeys(POLICIES, status))
        verdict = Verdict(**base)
        return Verdict(**{**base, "feedback": feedback_for(verdict)})

    def _timed(self, stage: str, start: float) -> None:
        self.stage_s[stage] = round(self.stage_s.get(stage, 0.0) + time.perf_counter() - start, 4)

    # -- the public surface the stages use (timing_stage.py, backends' compile checks) -----------------------
    def timed(self, stage: str, start: float) -> None:
        """Add the seconds since `start` to `stage` in the verdict's stage timings."""
        self.stage_s[stage] = round(self.stage_s.get(stage, 0.0) + time.perf_counter() - start, 4)

    def on_device(self, tensors: list) -> list:
        return [t.to(self.device) for t in tensors]

    def load_request(self, cand_path: Path, device: str, interpret: bool, gpu_mem_fraction: float) -> dict:
        """The worker's `load` command for this verification (constructs ModelNew with the reference's state)."""
        return {
            "cmd": "load",
            "path": str(cand_path),
            "device": device,
            "interpret": interpret,
            "init_inputs": self.ref.init_inputs,
            "seed": self.init_seed,
            "state_dict": self.ref.state_dict,
            "dtype": self.opts.precision,
            "eval_mode": self.opts.eval_mode,
            "gpu_mem_fraction": gpu_mem_fraction,
        }

    def worker_hooks(self) -> list[str]:
        """The worker hooks to install: every known backend's (a candidate may launch kernels of several
        languages, and each counts as its own work), this request's backend included."""
        packages = dict.fromkeys([*(b.package for b in BACKENDS.values()), self.backend.package])
        return [f"{package}.hook" for package in packages]

    def run_timeout(self) -> float:
        """The limit of one forward call in the worker (scaled to the reference's time)."""
        ref_ms = self.stage_s.get("ref_forward_ms", 0.0)
        return max(self.opts.timeout_floor_s, self.opts.timeout_scale * ref_ms / 1e3)

    def failed(self, reply: dict) -> Verdict:
        """The verdict of a worker reply that reports a failure (RetryAlone when another tenant may be to blame)."""
        machine = blame_candidate_fault(self, reply["status"], reply["stage"], reply["message"])
        if machine is not None:
            return machine
        return self.verdict(reply["status"], reply["stage"], reply["message"], error_log=reply.get("log", ""))

    # -- the run ---------------------------------------------------------------------------------
    def run(
        self,
        started: StartedWorker | None = None,
        deferred: list | None = None,
        reference: StartedWorker | None = None,
        imported: bool = False,
        keep_reference: bool = False,
    ) -> Verdict:
        """Verify; `started` is a worker the launcher started while this process imported torch.

        `deferred`: when given, the launcher's worker is not closed here but appended, for the launcher to
        close once the verdict is written (its folder is the launcher's; it holds no GPU lease by then).
        `reference`: the task's reference process, started by the launcher (`imported`: it has the task's module
        imported already, a serving judge's kept one); `keep_reference`: it is left running for the launcher
        (judge/serving.py), which closes it or keeps it for its next request.
        """
        with scratch_folder("kz-cand-") as shared, scratch_folder("kz-ref-") as ref_folder:
            if reference is None:
                try:
                    self.ref, reference = Reference.start(self.task, self.opts, self.device, Path(ref_folder))
                except TaskBroken as exc:  # its source cannot be written: nothing ran
                    if started is not None:
                        started.worker.close()
                    return self.verdict("task_broken", "reference", str(exc))
            else:  # started by the launcher while this process imported torch (or kept from its last request)
                self.ref = Reference(reference.worker, self.device, self.opts, imported=imported)
            self.ref_path = reference.cand_path
            interpret = self.device == "cpu" and self.backend.without_gpu == "interpret"
            if started is None or started.interpret != interpret:
                if started is not None:  # the launcher guessed the device wrong
                    started.worker.close()
                started = start_worker(
                    self.source,
                    Path(shared),
                    interpret=interpret,
                    sandbox=plan_for(self.opts),
                    host_mem_gb=self.opts.host_mem_gb,
                )
                deferred = None  # this worker lives in this call's folder: closed here
            self.deferred = deferred
            try:
                verdict = self._run(started)
                peaks, trace = usage.gpu_peaks(self, started)
                seconds = {**verdict.stage_seconds, **usage.cpu_seconds_of(self, started), **peaks}
                return replace(verdict, stage_seconds=seconds, notes=(*verdict.notes, *trace))
            finally:
                if not keep_reference:
                    self.ref.close()

    def _run(self, started: StartedWorker) -> Verdict:
        start = time.perf_counter()
        self.notes += started.plan.notes
        worker = started.worker
        try:
            if self.device == "cuda" and self.opts.cuda_ipc:
                why = worker.check_ipc() if started.ipc_why is None else started.ipc_why
                self.timed("ipc_check", start)
                if why:
                    self.notes.append(f"GPU tensors moved through host memory (CUDA IPC unavailable: {why[:200]})")
            try:
                with judge_memory_lease(self):  # measures the task's footprint in the reference's process first
                    try:
                        return self._stages(worker, started)
                    except TaskBroken as exc:  # the clean retry runs inside this verification's lease
                        return reference_failed(self, exc, worker)
            except TaskBroken as exc:  # the task's import or measurement failed, before any lease
                return reference_failed(self, exc, worker)
        except WorkerDied as exc:
            stage = self.fields.get("stage_hint", "load")
            machine = blame_candidate_fault(self, exc.status, stage, str(exc), exc.exit_signal)
            if machine is not None:
                return machine
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

    def _stages(self, worker: WorkerProcess, started: StartedWorker) -> Verdict:
        """The solo reference, the candidate's import, then the GPU part (under this verification's memory lease)."""
        if self.device == "cuda":
            reply = self._context(worker)
            if reply is not None:
                return reply
        if self.device == "cuda" and self.opts.time_it:
            try:
                take_solo_reference(self)
            except GpuUnhealthy as exc:
                return self.verdict("infra_error", "gpu_health", f"the GPU failed its health probe: {exc}")
        self.ref.import_task(self.ref_path)  # the task's module is imported before any candidate code runs
        # The candidate's import (its builds) runs before this sample takes the GPU.
        self.fields["stage_hint"] = "build"
        self.candidate_ran = True
        started_import = time.perf_counter()
        worker.send(
            {
                "cmd": "import",
                "path": str(started.cand_path),
                "device": self.device,
                "interpret": started.interpret,
                "gpu_mem_fraction": self.opts.gpu_mem_fraction,
                "hooks": self.worker_hooks(),
            }
        )
        reply, _ = worker.receive(self.opts.build_timeout_s, "importing the candidate (building its kernels)")
        self.timed("import", started_import)
        if not reply["ok"]:
            return self.failed(reply)
        self.stage_s["build"] = round(reply["build_s"], 4)
        self.notes += [f"worker: {str(n)[:300]}" for n in reply.get("notes", [])[:4]]  # its words, not ours
        if self.device != "cuda":
            return self._with_lease(worker, started)
        return self._on_gpu(worker, started)

    def _context(self, worker: WorkerProcess) -> Verdict | None:
        """The candidate's process makes its CUDA context before any candidate code is imported: only this reply may
        blame the machine for a context that cannot be made (faults.py); None when it was made."""
        worker.send({"cmd": "context", "device": self.device, "gpu_mem_fraction": self.opts.gpu_mem_fraction})
        reply, _ = worker.receive(self.opts.build_timeout_s, "making the CUDA context")
        return None if reply.get("ok") else self.failed(reply)

    def _on_gpu(self, worker: WorkerProcess, started: StartedWorker) -> Verdict:
        """The rest of the run under the GPU's shared lease (timing takes it alone, see `_timing`)."""
        torch.zeros(1, device="cuda")  # create the CUDA context before taking the GPU
        try:
            with gpu_lease(shared=True) as waited:
                held = self.lease_held_at = time.perf_counter()
                self.stage_s["gpu_wait"] = round(waited, 4)
                self.stage_s["gpu_lease_at"] = round(time.time(), 3)  # wall clock, to check leases never overlap
                if probe_log:
                    self.notes.append(probe_note())
                try:
                    verdict = self._with_lease(worker, started)
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
                "infra_error", "gpu_health", f"the GPU failed its health probe after an earlier crash: {exc}"
            )

    def _with_lease(self, worker: WorkerProcess, started: StartedWorker) -> Verdict:
        start = time.perf_counter()
        self.ref.build(self.ref_path, self.init_seed)  # TaskBroken (a ValueError) when the task's code fails
        self.timed("reference", start)
        return self._with_worker(worker, started.cand_path, started.interpret)

    def _with_worker(self, worker: WorkerProcess, cand_path: Path, interpret: bool) -> Verdict:
        start = time.perf_counter()
        self.fields["stage_hint"] = "init"
        worker.send(self.load_request(cand_path, self.device, interpret, self.opts.gpu_mem_fraction))
        reply, _ = worker.receive(self.opts.build_timeout_s, "constructing ModelNew")
        self.timed("load", start)
        if not reply["ok"]:
            return self.failed(reply)
        self.fields["params"] = reply["params"]
        failure = correctness(self, worker)
        check = backend_module(self.backend, "compile_check").compile_check if interpret else None
        if failure is not None:
            if (
                check is not None
                and self.opts.compile_check
                and failure.status == "runtime_error"
                and "out-of-bounds" not in failure.message
            ):
                # The interpreter trips over what a GPU compiler rejects (a misspelt tl. name): say so.
                compiled = check(self, cand_path)
                if compiled is not None and "CompilationError" in compiled.error_log:
                    return compiled
            return failure
        if check is not None and self.opts.compile_check:
            failed = check(self, cand_path)
            if failed is not None:
                return failed
        return self._timing(worker)

    def _timing(self, worker: WorkerProcess) -> Verdict:
        if self.device == "cpu" or not self.opts.time_it:
            note = "no GPU: correctness only" if self.device == "cpu" else "timing not asked for"
            status, message, per = policy_result(self, "correct", "")
            return self.verdict(status, "done", message, timing_note=note, policy_status=per)
        prime_inputs(self)  # drawn under the shared lease: the GPU is never held alone while inputs are made
        if drawn := predraw(self):  # the same for the default profile's fresh sets, with KZ_PREDRAW=1 (predraw.py)
            self.stage_s["predrawn"] = float(drawn)
        self.stage_s["gpu_shared"] = round(time.perf_counter() - self.lease_held_at, 4)  # then it lets go to time
        groups = priority.groups_of(worker.proc.pid, self.ref.worker.proc.pid)
        pids = [worker.proc.pid, self.ref.worker.proc.pid]
        with exclusive_gpu() as waited, priority.first(groups) as first, pinning.pinned(pids) as pinned:
            held = time.perf_counter()  # the serial window: CPU first (priority.py), one core with KZ_PIN_TIMING=1
            self.stage_s.update(
                gpu_excl_wait=round(waited, 4), gpu_excl_at=round(time.time(), 3), cpu_first=float(first)
            )
            if pinned:
                self.stage_s["pinned_threads"] = float(pinned)
            try:
                return timed_comparison(self, worker)
            finally:
                self.stage_s["gpu_excl"] = round(time.perf_counter() - held, 4)


def judge_request(
    request: dict,
    started: StartedWorker | None = None,
    deferred: list | None = None,
    reference=None,
    imported: bool = False,
    keep_reference: bool = False,
) -> dict:
    """Run one verification request (as written by verify()); return the result payload (`deferred`, `imported`,
    `keep_reference`: Judge.run; `reference`: the task's reference process, when the launcher started it)."""
    task = from_dict(Task, request["task"])
    opts = from_dict(VerifyOptions, request["options"])
    try:
        backend = from_dict(Backend, request["backend"])
        judge = Judge(task, request["source"], backend, opts)
        judge.lease_marker = request.get("lease_marker")
        verdict = judge.run(started, deferred, reference, imported, keep_reference)
        return {"verdict": to_dict(verdict)}
    except RetryAlone as exc:  # judge/faults.py: the caller verifies again, alone on the GPU
        return {"retry_alone": str(exc)}
    except (torch.OutOfMemoryError, cuda_ipc.IpcOutOfMemory) as exc:  # the judge's own GPU memory (its tensors,
        # the arenas it lends): another tenant's doing, or retried alone
        return {"retry_alone": f"the judge ran out of GPU memory: {str(exc)[:300]}"}
    except ValueError as exc:
        if started is not None:
            started.worker.close()
        return {"error": str(exc)}

"""The reference side of a verification, as the judge sees it: the task's `Model` in a sandboxed process of its own.

A task's code is as untrusted as a candidate's (tasks come from users and from the Proposer model), so the judge
never imports it: `Reference.start` starts `python -m kernelzero.verify.worker OUT_FD reference` in the sandbox
(worker/reference_role.py) with the task's source, size overrides applied; `build` imports it and constructs
`Model` under the init seed (the same seed initialises the candidate's parameters). Then `input_sets(seeds)`
draws inputs there from the judge's secret seeds, and `expected(inputs)` computes the reference's outputs. What
comes back is JSON and raw tensor bytes; the judge keeps the secret, the comparison and the clock.

A failure of the task's own code is the task's fault, not the candidate's: it raises `TaskBroken`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelzero.types import Task
from kernelzero.verify.judge.task_source import TaskBroken, start_reference
from kernelzero.verify.judge.timing_checks import well_formed_reply
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox.channel import ChannelError
from kernelzero.verify.sandbox.values import unpack_values
from kernelzero.verify.sandbox.worker_process import StartedWorker, WorkerDied, WorkerProcess

FOOTPRINT = ("params", "inputs", "outputs")


STAGE_CALIBRATE_ENV = "KZ_STAGE_CALIBRATE"


def stage_calibrate() -> bool:
    """Whether each timing block's GPU hold is calibrated in the block's stage round trip rather than at the start of
    its run, inside the judge's clock (`KZ_STAGE_CALIBRATE`: 1 on, 0 or unset off; opt-in until the GPU gate has run
    it). The calibration is 8 empty calls behind holds and their synchronises (worker/hold.py `Hold.calibrate`):
    about 1 ms of host and GPU time a block that a process's host speed scales, on both sides, while a block of a
    64 MB input set holds one timed call (bench/verify.md, twentieth session: an honest sum_dim run corrected)."""
    raw = os.environ.get(STAGE_CALIBRATE_ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{STAGE_CALIBRATE_ENV} must be 0 or 1, got {raw!r}")
    return raw == "1"


def staged_time(worker, command: dict, timeout_s: float, what: str) -> tuple[dict, list, float]:
    """A timing block in three round trips (worker/worker.py `time_stage`, `time_run`, `time_fetch`): (the run's
    reply, the outputs, seconds of the run alone in the judge's clock). The inputs' transfer before the run and the
    outputs' after it stay out of the judge's clock for the block, whose noise they were (a block of one large call
    varied by hundreds of microseconds, H200, 2026-12-04). A failed stage or run is returned as its reply. The stage's
    own time in the judge's clock is left on `worker.stage_ms`, for the record (docs/threat_model_coverage.md A18: the
    staged sets wait in the worker's process outside the run's clock)."""
    began = time.perf_counter()
    worker.send({**command, "cmd": "time_stage", "calibrate": stage_calibrate()})
    staged, _ = worker.receive(timeout_s, what)
    worker.stage_ms = (time.perf_counter() - began) * 1e3
    if not staged.get("ok"):
        return staged, [], 0.0
    start = time.perf_counter()
    worker.send({"cmd": "time_run"})
    reply, _ = worker.receive(timeout_s, what)
    seconds = time.perf_counter() - start
    if not reply.get("ok"):
        return reply, [], seconds
    worker.send({"cmd": "time_fetch"})
    _, tensors = worker.receive(timeout_s, what)
    return reply, tensors, seconds


@dataclass
class Reference:
    """A running reference process with what the candidate needs to be constructed alike."""

    worker: WorkerProcess
    device: str
    opts: VerifyOptions
    built: bool = False  # `build` ran
    imported: bool = False  # `import_task` ran
    init_inputs: list | None = None  # `get_init_inputs()`, sent to the candidate's worker
    state_dict: dict | None = None  # the reference's initial parameters, sent to the candidate's worker

    @classmethod
    def start(cls, task: Task, opts: VerifyOptions, device: str, folder: Path) -> tuple[Reference, StartedWorker]:
        """Start the reference's process (it imports torch while the judge does other work)."""
        started = start_reference(task, opts, folder)
        return cls(started.worker, device, opts), started

    def _ask(self, command: dict, timeout_s: float, what: str) -> tuple[dict, list]:
        try:
            self.worker.send(command)
            reply, tensors = self.worker.receive(timeout_s, what)
        except WorkerDied as exc:
            raise TaskBroken(f"the task's reference process failed during {what} ({exc.status}): {exc}") from None
        if not reply.get("ok"):
            detail = f"{reply.get('message', '')}\n{reply.get('log', '')[-800:]}".strip()
            raise TaskBroken(f"the task itself is broken ({what}): {detail}")
        return reply, tensors

    def import_task(self, cand_path: Path) -> None:
        """Import the task's module in the reference's process (once)."""
        if self.imported:
            return
        if self.device == "cuda" and self.opts.cuda_ipc:
            self.worker.check_ipc()  # '' when GPU tensors can move through CUDA IPC; else through host memory
        command = {
            "cmd": "import",
            "path": str(cand_path),
            "device": self.device,
            "interpret": False,
            "gpu_mem_fraction": self.opts.gpu_mem_fraction,
            "hooks": [],
            "class_name": "Model",
        }
        self._ask(command, self.opts.build_timeout_s, "importing the task")
        self.imported = True

    def footprint(self, cand_path: Path) -> dict | None:
        """The task's bytes of parameters, one input set and outputs at the verification's precision (measured on the
        meta device: no GPU memory); None when its code does not run there."""
        self.import_task(cand_path)
        try:
            self.worker.send({"cmd": "measure", "dtype": self.opts.precision})
            reply, _ = self.worker.receive(self.opts.build_timeout_s, "measuring the task's footprint")
        except WorkerDied as exc:
            raise TaskBroken(f"the task's reference process failed during measuring ({exc.status}): {exc}") from None
        footprint = reply.get("footprint") if reply.get("ok") else None
        if not isinstance(footprint, dict) or not all(isinstance(footprint.get(k), int) for k in FOOTPRINT):
            return None
        return {k: max(0, footprint[k]) for k in FOOTPRINT}

    def build(self, cand_path: Path, init_seed: int) -> None:
        """Import the task and construct `Model` under `init_seed` (once)."""
        if self.built:
            return
        self.import_task(cand_path)
        command = {
            "cmd": "load",
            "seed": init_seed,
            "dtype": self.opts.precision,
            "eval_mode": self.opts.eval_mode,
            "fp64": self.opts.ref_fp64,
        }
        reply, tensors = self._ask(command, self.opts.build_timeout_s, "constructing the task's Model")
        values = self._unpack(reply, tensors)
        self.init_inputs, self.state_dict = list(values["init_inputs"]), dict(values["state_dict"])
        self.built = True

    def input_sets(self, seeds: list[int], timeout_s: float, on_device: bool | None = None) -> list[list]:
        """One input set per seed, on the judge's device; drawn on the CPU under a fixed seed, as KernelBench does,
        unless `on_device` says where."""
        on_device = self.opts.seed is None if on_device is None else on_device
        reply, tensors = self._ask({"cmd": "draw", "seeds": seeds, "on_device": on_device}, timeout_s, "get_inputs")
        sets = self._unpack(reply, tensors)
        if not isinstance(sets, list) or len(sets) != len(seeds) or not all(isinstance(s, list) for s in sets):
            raise TaskBroken("the task itself is broken (get_inputs): the reference process sent malformed inputs")
        return [[x.to(self.device) if isinstance(x, torch.Tensor) else x for x in s] for s in sets]

    def expected(self, inputs: list, timeout_s: float) -> list[torch.Tensor]:
        """The reference's outputs for `inputs`."""
        _, tensors = self._ask({"cmd": "run", "inputs": inputs}, timeout_s, "the reference forward")
        return [t.to(self.device) for t in tensors]

    def time(
        self,
        sets: list[list],
        warmup: int,
        host_check: bool,
        timeout_s: float,
        compiled: bool = False,
        audit: list[int] = (),
        hold_us: float = 0.0,
    ) -> tuple[list[float], list]:
        """The reference's timed calls on `sets` (the candidate's protocol, audit calls at `audit` included):
        (per-call ms, outputs per timed then audit call). `compiled`: the reference under torch.compile. `hold_us`:
        the GPU hold's least length before each call (worker/hold.py). The reply's other numbers stay in `last`."""
        command = {
            "sets": sets,
            "warmup": warmup,
            "host_check": host_check,
            "compiled": compiled,
            "audit": list(audit),
            "hold_us": hold_us,
        }
        what = "timing the reference"
        try:
            reply, tensors, seconds = staged_time(self.worker, command, timeout_s, what)
        except WorkerDied as exc:
            raise TaskBroken(f"the task's reference process failed during {what} ({exc.status}): {exc}") from None
        if not reply.get("ok"):
            detail = f"{reply.get('message', '')}\n{reply.get('log', '')[-800:]}".strip()
            raise TaskBroken(f"the task itself is broken ({what}): {detail}")
        if not well_formed_reply(reply):
            raise TaskBroken(f"the task itself is broken ({what}): its timing reply's numbers are malformed")
        self.last_held = list(reply.get("held_ms", []))  # the same calls' host-bounded times (timing_checks.py)
        keys = ("launch_ms", "launch_p90_ms", "protocol", "capped", "events_ms", "calls_trace")
        self.last = {k: reply.get(k) for k in keys} | {
            "run_s": seconds,
            "stage_ms": getattr(self.worker, "stage_ms", 0.0),
        }
        n = reply["n_out"]
        outs = [[t.to(self.device) for t in tensors[k * n : (k + 1) * n]] for k in range(len(sets) - warmup)]
        return list(reply["times_ms"]), outs

    @staticmethod
    def _unpack(reply: dict, tensors: list):
        try:
            return unpack_values(reply["values"], tensors)
        except (ChannelError, KeyError, TypeError) as exc:
            raise TaskBroken(f"the reference process sent a malformed reply: {exc}") from None

    def close(self) -> None:
        self.worker.close()

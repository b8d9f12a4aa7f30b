"""The candidate's process: `python -m kernelzero.verify.worker OUT_FD` (`__main__.py`; started by the judge only).

Everything here runs beside untrusted code, so nothing here is trusted: the judge compares outputs
and decides the status. The worker imports the candidate (building its kernels), constructs
`ModelNew`, runs the forward calls the judge asks for on the inputs the judge sends, and sends back
outputs as raw bytes. Commands arrive as pickles on stdin; replies leave as JSON + bytes on OUT_FD.

Commands: `warm` (a standby worker's CUDA context and Triton warm-up, verify/worker/warm.py), `ipc_check` (open a buffer the judge lends through CUDA IPC, send it back the same way; runs
before the candidate is imported), `import` (guards, then import the candidate: its builds), `load`
(construct, load the reference's weights), `run` (one forward, outputs and inputs-after back; inputs the
judge lent through IPC it inspects itself), `time` (warm-up, timed calls over rotating input sets, last
outputs back). Every command says whether replies may carry GPU tensors as IPC handles (`ipc_out`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import traceback
from typing import Any

import torch

from kernelzero.verify.sandbox.channel import FileTensor, pin_classes, send_msg
from kernelzero.verify.sandbox.channel_auth import signed_writer
from kernelzero.verify.sandbox.cuda_ipc import IpcTensor, open_lent
from kernelzero.verify.worker import floor
from kernelzero.verify.worker.guards import Guards, output_problem, warm_dispatch
from kernelzero.verify.worker.hold import Hold
from kernelzero.verify.worker.seal import TIMED_CALL, CleanRunner, seal
from kernelzero.verify.worker.timed_block import _CLONE, not_tensors, output_tensors, stage_hold, time_block
from kernelzero.verify.worker.timing import sync_and_clock, time_calls
from kernelzero.verify.worker.warm import warm_gpu

LOG_LIMIT = 4000
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _tail(text: str, limit: int = LOG_LIMIT) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def classify(exc: BaseException) -> str:
    """The verdict status an exception raised by candidate code maps to."""
    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower():
        return "oom"
    if name in ("CompilationError", "CompileTimeAssertionFailure") or "Error building extension" in text:
        return "compile_error"
    faults = (
        "illegal memory access",
        "unspecified launch failure",
        "misaligned address",
        "operation not supported on global/shared address space",
        "illegal instruction",
    )  # sticky kernel faults
    if any(f in text for f in faults):
        return "crash"
    return "runtime_error"


class Worker:
    """State of one candidate process."""

    WARM_TRITON = True  # a standby's warm-up compiles and launches a Triton kernel (warm.py); not the reference's

    def __init__(self, out_fd: int):
        self.out = out_fd
        self.model: torch.nn.Module | None = None
        self.device = "cpu"
        self.hooks: list = []  # the backends' worker hooks, installed before the candidate is imported
        self.module = None  # the imported candidate
        self.runner = CleanRunner()  # candidate code runs on this thread only (seal.py)
        self.hold: Hold | None | bool = False  # the GPU hold (hold.py), built at the first timing; None: cannot run
        self.staged: tuple | None = None  # a timing block's command and prepared sets (`time_stage`)
        self.outputs: list = []  # the last staged block's outputs (`time_fetch`)

    def error_reply(self, exc: BaseException, stage: str) -> dict[str, Any]:
        return {
            "ok": False,
            "status": classify(exc),
            "stage": stage,
            "message": f"{type(exc).__name__}: {_tail(str(exc), 600)}",
            "log": _tail(traceback.format_exc()),
        }

    def reply_error(self, exc: BaseException, stage: str) -> None:
        send_msg(self.out, self.error_reply(exc, stage))

    def import_candidate(self, req: dict[str, Any]) -> None:
        """Install the guards and import the candidate (which builds its extensions); reply with the time.

        The judge asks for this before it takes the GPU, so builds never hold a GPU.
        """
        reply = self._import(req)  # first: it replaces `self.out` with the signed writer
        send_msg(self.out, reply)

    def _import(self, req: dict[str, Any]) -> dict[str, Any]:
        key = req.pop("auth_key", None)
        if key is not None:  # every reply from now on is tagged (channel.py, "Authentication"); the key is held
            self.out = signed_writer(self.out, key)  # only in that writer's closure, which only this object holds
            del key
        self.device = req["device"]
        self.guards = Guards(warm=self.warm_dispatch_first(req))
        for name in req["hooks"]:  # each backend counts its own launches (verify/backends/<name>/hook.py)
            hook = importlib.import_module(name).install(self.guards, self.device, req["interpret"])
            if hook is not None:
                self.hooks.append(hook)
        self.guards.snapshot()
        if self.device.startswith("cuda"):
            reply = self._make_context(req)
            if reply is not None:
                return reply
        start = time.perf_counter()
        try:
            spec = importlib.util.spec_from_file_location("candidate", req["path"])
            module = importlib.util.module_from_spec(spec)
            pin_classes(FileTensor, IpcTensor)
            seal()
            self.guards.watch.armed = True  # from here on, the candidate's code runs (worker/watch.py)
            sys.modules["candidate"] = module
            self.runner.run(spec.loader.exec_module, module)
        except SyntaxError as exc:
            return {
                "ok": False,
                "status": "format_error",
                "stage": "load",
                "message": f"not valid Python: line {exc.lineno}: {exc.msg}",
                "log": "",
            }
        except BaseException as exc:
            return self.error_reply(exc, "build")
        name = req.get("class_name", "ModelNew")
        cls = getattr(module, name, None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            return {
                "ok": False,
                "status": "format_error",
                "stage": "load",
                "message": f"the module defines no `class {name}(nn.Module)`",
                "log": "",
            }
        self.module = module
        notes = [note for hook in self.hooks for note in hook.notes()]
        return {"ok": True, "build_s": time.perf_counter() - start, "notes": notes}

    def _make_context(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """The CUDA context (and the memory cap), before any candidate code runs; a failure reply, or None."""
        try:
            torch.cuda.set_per_process_memory_fraction(req["gpu_mem_fraction"])
            torch.zeros(1, device=req["device"])
            if self.hold is False:  # built here, while the GPU is shared, not in the timing's exclusive window
                self.hold = Hold.create(req["device"])
        except BaseException as exc:  # the GPU, not the candidate: the judge blames it right (judge/faults.py)
            return {**self.error_reply(exc, "context"), "status": "oom" if classify(exc) == "oom" else "crash"}
        return None

    def context(self, req: dict[str, Any]) -> None:
        """The `context` command: make the CUDA context now (the judge asks before the candidate's import)."""
        send_msg(self.out, self._make_context(req) or {"ok": True})

    def load(self, req: dict[str, Any]) -> None:
        """Construct ModelNew (importing first unless `import` ran) and load the reference's weights."""
        build_s = 0.0
        if self.module is None:
            reply = self._import(req)
            if not reply["ok"]:
                return send_msg(self.out, reply)
            build_s = reply["build_s"]
        cls = self.module.ModelNew
        start = time.perf_counter()
        try:
            torch.manual_seed(req["seed"])
            model = self.runner.run(cls, *req["init_inputs"])
            params = self._load_weights(model, req["state_dict"])
            model = model.to(self.device)
            if req["dtype"] != "fp32":
                model = model.to(DTYPES[req["dtype"]])
            model.train(not req["eval_mode"])
        except BaseException as exc:
            return self.reply_error(exc, "init")
        finally:  # the init seed is no secret, but nothing later in this process should follow from it
            torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        self.model = model
        send_msg(self.out, {"ok": True, "params": params, "build_s": build_s, "init_s": time.perf_counter() - start})

    @staticmethod
    def _load_weights(model: torch.nn.Module, reference: dict[str, torch.Tensor]) -> str:
        mine = model.state_dict()
        same = mine.keys() == reference.keys() and all(mine[k].shape == reference[k].shape for k in mine)
        if same and mine:
            model.load_state_dict(reference, strict=True)
            return "loaded"
        return "seeded"

    def warm_dispatch_first(self, req: dict[str, Any]) -> bool:
        """Pay the first dispatch mode's imports at import time (the candidate's calls are all watched)."""
        return True

    def extra_commands(self) -> dict:
        """Commands beyond the candidate's (the reference role adds its own)."""
        return {}

    def ipc_check(self, req: dict[str, Any]) -> None:
        try:
            probe = open_lent(req["probe"]).clone()
        except Exception as exc:  # noqa: BLE001 - any failure means: no IPC on this machine
            return send_msg(self.out, {"ok": False, "message": f"{type(exc).__name__}: {exc}"})
        send_msg(self.out, {"ok": True}, [probe])

    def warm(self, req: dict[str, Any]) -> None:
        """A standby worker's warm-up (verify/worker/warm.py), before any candidate is known."""
        try:
            took = warm_dispatch()
            note = f"dispatch {took:.2f} s; " + (warm_gpu(self.WARM_TRITON) if req.get("gpu") else "no GPU")
        except Exception as exc:  # noqa: BLE001 - a warm-up that fails only costs the candidate that time later
            note = f"warm-up failed: {type(exc).__name__}: {str(exc)[:200]}"
        send_msg(self.out, {"ok": True, "note": note})

    def _prepare(self, inputs: list[Any]) -> list[Any]:
        inputs = [open_lent(x) if isinstance(x, IpcTensor) else x for x in inputs]
        out = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        for hook in self.hooks:
            out = [hook.guard_input(x) if isinstance(x, torch.Tensor) else x for x in out]
        return out

    def _forward(
        self, inputs: list[Any], modes: tuple = (), probe: tuple | None = None, report: bool = True
    ) -> list[torch.Tensor] | None:
        """The candidate's outputs for `inputs` (None after replying that they are not tensors); `probe`: a timed
        call's (start event, end event, host seconds list), bracketing the forward on the runner thread (timing.py)."""
        if probe is None:
            raw = self.runner.run(self.model, *inputs, modes=(torch.no_grad(), *modes))
        else:
            sync, clock = sync_and_clock()
            raw = self.runner.run(
                TIMED_CALL, self.model, inputs, *probe[:2], sync, clock, probe[2], modes=(torch.no_grad(), *modes)
            )
        outs = output_tensors(raw)
        if outs is None:
            failure = not_tensors(raw, "correctness")
            if not report:  # a timing block replies once, at its end
                raise RuntimeError(failure["message"])
            send_msg(self.out, failure)
        return outs

    def run(self, req: dict[str, Any]) -> None:
        lent = any(isinstance(x, IpcTensor) for x in req["inputs"])  # the judge reads those itself
        inputs = self._prepare(req["inputs"])
        watch = self.guards.watch
        try:
            watch.in_forward = True
            with self.guards.observe(record_ops=True) as modes:
                outs = self._forward(inputs, modes)
                if self.device.startswith("cuda"):
                    torch.cuda.synchronize()
        except BaseException as exc:
            return self.reply_error(exc, "correctness")
        finally:
            watch.in_forward = False
            watch.end_call(1)
        if outs is None:
            return
        host, probes = watch.take()
        tensors_in = [] if lent else [x for x in inputs if isinstance(x, torch.Tensor)]
        report = {
            "launches": dict(self.guards.launches),
            "torch_ops": sorted(set(self.guards.last_ops) | set(host)),
            "probes": probes,
            "tampered": self.guards.tampered(),
            "output_problem": output_problem(outs, inputs),
            "bf16": any(hook.bf16_seen() for hook in self.hooks),
        }
        if report["output_problem"]:
            outs = [o.clone() for o in outs]  # send values anyway; the judge rejects the aliasing
        send_msg(self.out, {"ok": True, "n_out": len(outs), **report}, outs + tensors_in)

    def gpu_compile(self, req: dict[str, Any]) -> None:
        """No GPU here: compile every Triton kernel the forward launches for the target GPU instead."""
        inputs = self._prepare(req["inputs"])
        try:
            records = importlib.import_module(req["hook"]).gpu_compile(lambda: self._forward(inputs), req["arch"])
        except BaseException as exc:
            return self.reply_error(exc, "build")
        send_msg(self.out, {"ok": True, "records": records})

    def time_stage(self, req: dict[str, Any]) -> None:
        """Take a timing block's input sets onto the device and keep them: the judge's clock for the block
        (`time_run`) then holds no transfer."""
        try:
            self.staged = (req, [self._prepare(s) for s in req["sets"]])
            stage_hold(self, req, len(self.staged[1]))  # the hold's calibration, outside the judge's clock
            if req.get("floor"):  # a floor batch: captured now, replayed by `time_run` (worker/floor.py)
                self.staged = (req, floor.stage(self, self.staged[1]))
                if self.staged[1][0] is None:
                    return send_msg(self.out, {"ok": True, "unavailable": self.staged[1][1]})
        except BaseException as exc:
            self.staged = None  # nothing half-staged is run by a later `time_run`
            return self.reply_error(exc, "timing")
        send_msg(self.out, {"ok": True})

    def time_run(self, req: dict[str, Any]) -> None:
        """Run the staged block; reply with its times alone, keep its outputs for `time_fetch`."""
        staged, self.staged = self.staged, None
        if staged and staged[0].get("floor"):
            batch, why = staged[1]
            if batch is None:
                return send_msg(self.out, {"ok": True, "floor_calls": 0, "unavailable": why})
            self.staged = staged  # kept until its outputs are fetched: its blank replays after it (judge/floor.py)
            if req.get("blank"):  # the copies alone
                return send_msg(self.out, floor.run(batch, blank=True))
            reply, self.outputs = floor.run(batch), floor.outputs(batch)
            return send_msg(self.out, reply)
        reply, self.outputs = (
            self._timed(*staged) if staged else (self.error_reply(RuntimeError("nothing staged"), "timing"), [])
        )
        send_msg(self.out, reply)

    def time_fetch(self, req: dict[str, Any]) -> None:
        """The last block's outputs (timed calls', then audits'); a floor batch is let go with them (its graph and
        placeholders hold up to a block's bytes)."""
        tensors, self.outputs = self.outputs, []
        if self.staged and self.staged[0].get("floor"):
            self.staged = None
        send_msg(self.out, {"ok": True, "n_tensors": len(tensors)}, tensors)

    def _timed(self, req: dict[str, Any], sets: list[list]) -> tuple[dict[str, Any], list]:
        """Warm-up calls, then timed calls, each behind the GPU hold (worker/timed_block.py); on a GPU where the hold
        cannot run, each after a device-wide synchronise (`_time_synced`). (reply, output tensors)."""
        if self.device.startswith("cuda"):
            if self.hold is False:
                self.hold = Hold.create(self.device)
            if self.hold is None:
                return self._time_synced(req, sets)
        return time_block(self, req, sets, self.hold or None)

    def _time_synced(self, req: dict[str, Any], sets: list[list]) -> tuple[dict[str, Any], list]:
        """Warm-up calls, then timed calls, each on an input set of its own (the judge drew every set fresh).

        `sets[:warmup]` are for the warm-up calls, then one set per timed call, then one per audit call. The
        outputs of every timed and audit call go back: the judge checks all of them, so no call can tell whether
        it is checked, and no call sees contents an earlier call saw (warm-ups included), so a result cached by
        pointer, object or content saves nothing. Audit calls (`audit`: the timed positions they come before,
        drawn by the judge) run untimed with the PyTorch op recorder; host compute and probes of the watch state
        are seen on every call (worker/watch.py), so a candidate cannot safely compute with PyTorch when unwatched.
        """
        warmup, audit = req["warmup"], dict(zip(req.get("audit", []), range(len(req.get("audit", []))), strict=True))
        first_audit = len(sets) - len(audit)
        outs: list[list[torch.Tensor]] = []
        audited: list[list[torch.Tensor]] = [[] for _ in audit]
        without_kernel, audit_ops = [], set()

        def audit_call(pos: int) -> None:
            if pos not in audit:
                return
            with self.guards.observe(record_ops=True) as modes:
                got = self._forward(sets[first_audit + audit[pos]], modes, report=False)
            if not self.guards.launches:
                without_kernel.append(-1 - audit[pos])
            audit_ops.update(self.guards.last_ops)
            audited[audit[pos]] = got

        def call(pos: int, probe: tuple | None) -> None:
            with self.guards.observe(record_ops=False) as modes:
                got = self._forward(sets[pos], modes, probe, report=False)
            if pos >= warmup:
                if not self.guards.launches:
                    without_kernel.append(pos)
                outs.append(
                    [_CLONE(t) if type(t) is torch.Tensor else t for t in got]
                )  # as the call left them (seal.TIMED_BATCH)

        watch = self.guards.watch
        held: list[float] = []  # host-bounded times of the same calls (timing.time_calls)
        try:
            watch.in_forward = True  # the whole block, once: nothing is switched between watched and timed calls
            timed, keys = list(range(warmup, first_audit)), list(range(warmup))
            times = time_calls(call, timed, warmup, self.device, req["host_check"], audit_call, keys, held)
        except BaseException as exc:
            return self.error_reply(exc, "timing"), []
        finally:
            watch.in_forward = False
            watch.end_call(len(sets))
        host, probes = watch.take()
        reply = {
            "ok": True,
            "times_ms": times,
            "held_ms": held,
            "n_out": len(outs[0]) if outs else 0,
            "calls_without_kernel": len(without_kernel),
            "torch_ops": sorted(audit_ops | set(host)),
            "probes": probes,
            "tampered": self.guards.tampered(),
            "protocol": f"synced ({Hold.unavailable})",
        }
        return reply, [t for got in outs + audited for t in got]

"""The task's reference, run in a sandboxed process of its own (`python -m kernelzero.verify.worker OUT_FD reference`).

A task's source is as untrusted as a candidate's: tasks come from users and from the Proposer model. So its
import, `get_init_inputs()`, `get_inputs()` and the reference forward run here, with the candidate's limits (no
network, an unprivileged user, its own folder), and the judge keeps the comparison, the secret and the clock.
The judge sends the seeds: `init_seed` for the parameters (the candidate is constructed under the same seed, so
parameters match through seeded initialisation even when their names differ) and one secret seed per input draw.
Everything this process sends back is JSON plus raw tensor bytes (`values.pack_values`); the judge never
unpickles it.

Commands beyond the candidate worker's: `measure` (the task's footprint on the meta device: bytes of parameters, one
input set and the outputs, for the judge's GPU memory lease; touches no GPU memory), `load` (construct `Model`, send back the init inputs and the initial
parameters), `draw` (input sets from seeds), `run` (the expected outputs; in float64 with `fp64`), and `time`
(the same timed protocol as the candidate's, for interleaved timing), and `rest` (a serving judge's kept reference
between requests: the model dropped, the module kept).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import os
from typing import Any

import torch

from kernelzero.verify.sandbox.channel import send_msg
from kernelzero.verify.sandbox.values import pack_values
from kernelzero.verify.worker.worker import DTYPES, Worker


def flatten(out: Any) -> list[torch.Tensor]:
    """The tensors of a forward's result, in order (a tensor, or nested tuples/lists of them)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flatten(item)]
    raise TypeError(f"the reference returned a {type(out).__name__}, not tensors")


class ReferenceWorker(Worker):
    """The reference's process: the task module's `Model`, `get_inputs` and `get_init_inputs`."""

    WARM_TRITON = False  # the task's PyTorch ops need no Triton: its standby warm-up is CUDA alone (warm.py)

    def __init__(self, out_fd: int):
        super().__init__(out_fd)
        self.model64: torch.nn.Module | None = None
        self.dtype = "fp32"

    def extra_commands(self) -> dict:
        return {"draw": self.draw, "measure": self.measure, "rest": self.rest}

    def warm_dispatch_first(self, req: dict[str, Any]) -> bool:
        """Only on a GPU, where the reference's timing blocks carry audit calls with the op recorder (as the
        candidate's do); on a CPU nothing of the reference is recorded, and the seconds of imports are saved."""
        return req["device"].startswith("cuda")

    def measure(self, req: dict[str, Any]) -> None:
        """The task's footprint in bytes at `dtype`, from a construction, a draw and a forward on the meta device
        (shapes only: nothing is computed or allocated). `ok: False` when the task's code does not run there
        (data-dependent shapes, `.item()`): the judge then leases a default."""
        module, size = self.module, DTYPES[req["dtype"]].itemsize

        def nbytes(tensors: list) -> int:  # floating tensors are cast to the precision, float64 ones stay 8 bytes
            cast = (torch.float32, torch.float16, torch.bfloat16)
            return sum(t.numel() * (size if t.dtype in cast else t.element_size()) for t in tensors)

        try:
            with torch.device("meta"), torch.no_grad():
                model = module.Model(*module.get_init_inputs())
                inputs = list(module.get_inputs())
                outs = flatten(model(*inputs))
                inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
            footprint = {
                "params": nbytes([*model.parameters(), *model.buffers()]),
                "inputs": nbytes(inputs),
                "outputs": nbytes(outs),
            }
        except BaseException as exc:  # noqa: BLE001 - any failure: no measurement, the judge leases a default
            return send_msg(self.out, {"ok": False, "message": f"{type(exc).__name__}: {str(exc)[:300]}"})
        finally:
            torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        send_msg(self.out, {"ok": True, "footprint": footprint})

    def load(self, req: dict[str, Any]) -> None:
        """Construct Model under `seed`; reply with the init inputs and the initial parameters (on the CPU)."""
        module = self.module
        for name in ("get_inputs", "get_init_inputs"):
            if not callable(getattr(module, name, None)):
                return send_msg(self.out, self._broken(f"the task defines no callable `{name}`"))
        try:
            torch.manual_seed(req["seed"])
            init_inputs = list(module.get_init_inputs())
            torch.manual_seed(req["seed"])
            model = module.Model(*init_inputs)
            state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            model = model.to(self.device)
            if req["dtype"] != "fp32":
                model = model.to(DTYPES[req["dtype"]])
            model.train(not req["eval_mode"])
            self.model64 = copy.deepcopy(model).double() if req.get("fp64") else None
            structure, tensors = pack_values({"init_inputs": init_inputs, "state_dict": state})
        except BaseException as exc:
            return self.reply_error(exc, "init")
        finally:
            torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        self.model, self.dtype = model, req["dtype"]
        send_msg(self.out, {"ok": True, "values": structure}, tensors)

    def draw(self, req: dict[str, Any]) -> None:
        """Input sets, one per seed, cast to the precision and placed on the device.

        With a secret seed on a GPU the draw happens on the GPU itself (seconds of CPU work less at bench sizes);
        a fixed seed (the kernelbench profile) draws on the CPU, as KernelBench does, so its inputs are
        KernelBench's.
        """
        sets = []
        try:
            for seed in req["seeds"]:
                torch.manual_seed(seed)
                on_gpu = self.device.startswith("cuda") and req["on_device"]
                with torch.device(self.device) if on_gpu else contextlib.nullcontext():
                    raw = list(self.module.get_inputs())
                dtype = DTYPES[self.dtype]
                cast = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in raw]
                sets.append([x.to(self.device) if isinstance(x, torch.Tensor) else x for x in cast])
            structure, tensors = pack_values(sets)
        except BaseException as exc:
            return self.reply_error(exc, "inputs")
        finally:
            torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        send_msg(self.out, {"ok": True, "values": structure}, tensors)

    def _timed(self, req: dict[str, Any], sets: list[list]) -> tuple[dict[str, Any], list]:
        """The candidate's timed protocol on the reference (under torch.compile with `compiled`)."""
        if not req.get("compiled"):
            return super()._timed(req, sets)
        eager = self.model
        try:
            self.model = torch.compile(eager)
        except BaseException as exc:
            return self.error_reply(exc, "timing"), []
        try:
            return super()._timed(req, sets)
        finally:
            self.model = eager

    def run(self, req: dict[str, Any]) -> None:
        """The expected outputs for one input set (through the float64 copy when asked)."""
        inputs = self._prepare(req["inputs"])
        try:
            with torch.no_grad():
                if self.model64 is not None:
                    up = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
                    outs = flatten(self.model64(*up))
                    outs = [o.to(DTYPES[self.dtype]) if o.is_floating_point() else o for o in outs]
                else:
                    outs = [o.clone() for o in flatten(self.model(*inputs))]
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        except BaseException as exc:
            return self.reply_error(exc, "reference")
        send_msg(self.out, {"ok": True, "n_out": len(outs)}, outs)

    def rest(self, req: dict[str, Any]) -> None:
        """Between two requests of a serving judge (verify/judge/serving.py): drop the model, its float64 copy and
        any staged timing block, and the allocator's cache; keep the task's module for the next request of the same
        task. Replies with the GPU bytes still reserved (the judge's ledger counts them while it waits)."""
        self.model = self.model64 = None
        self.staged, self.outputs = None, []
        gc.collect()
        reserved = 0
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            reserved = torch.cuda.memory_reserved()
        send_msg(self.out, {"ok": True, "reserved": reserved})

    @staticmethod
    def _broken(message: str) -> dict:
        return {"ok": False, "status": "runtime_error", "stage": "reference", "message": message, "log": ""}

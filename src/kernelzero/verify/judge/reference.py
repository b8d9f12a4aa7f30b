"""The reference side of a verification, in the judge: the task's `Model`, its inputs and expected outputs.

`Reference.build(task, opts, device, seed, workdir)` loads the task module, constructs `Model` from
`get_init_inputs()` under `seed` (the same seed initialises the candidate's parameters, so a candidate whose
parameter names differ still matches through seeded initialisation) and keeps a copy of its state for the worker.
`inputs(seed)` draws one input set; `expected(inputs)` computes the reference's outputs (in float64 when the
options ask for it).
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelzero.tasks.module import load_reference
from kernelzero.tasks.quality import flatten_outputs
from kernelzero.types import Task
from kernelzero.verify.options import VerifyOptions

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class Reference:
    """A built reference model with what the worker needs to construct the candidate."""

    module: Any  # the loaded task module (`get_inputs`, `get_init_inputs`, `model_cls`)
    model: torch.nn.Module  # on the judge's device, in the options' precision and mode
    model64: torch.nn.Module | None  # a float64 copy when `ref_fp64`
    init_inputs: list  # `get_init_inputs()`, sent to the worker
    state_dict: dict[str, torch.Tensor]  # the reference's initial parameters, sent to the worker
    device: str
    opts: VerifyOptions

    @classmethod
    def build(cls, task: Task, opts: VerifyOptions, device: str, seed: int, workdir: Path) -> Reference:
        """Load the task and construct its Model (raises `ContractError` for a broken task)."""
        ref = load_reference(task.source, task.sizes, workdir / "task.py")
        torch.manual_seed(seed)
        init_inputs = list(ref.get_init_inputs())
        torch.manual_seed(seed)
        model = ref.model_cls(*init_inputs)
        state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model = model.to(device)
        if opts.precision != "fp32":
            model = model.to(DTYPES[opts.precision])
        model = model.train(not opts.eval_mode)
        model64 = copy.deepcopy(model).double() if opts.ref_fp64 else None
        return cls(ref, model, model64, init_inputs, state_dict, device, opts)

    def inputs(self, seed: int) -> list:
        """One input draw, on the judge's device (the channel hands the worker copies).

        With a secret seed the draw happens on the GPU itself (seconds of CPU work less per trial at bench
        sizes); a fixed seed (the kernelbench profile) draws on the CPU, as KernelBench does, so its
        inputs are KernelBench's.
        """
        torch.manual_seed(seed)
        on_gpu = self.device == "cuda" and self.opts.seed is None
        with torch.device(self.device) if on_gpu else contextlib.nullcontext():
            raw = list(self.module.get_inputs())
        dtype = DTYPES[self.opts.precision]
        cast = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in raw]
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in cast]

    def expected(self, inputs: list) -> list[torch.Tensor]:
        """The reference's outputs for `inputs` (flattened to a list of tensors)."""
        with torch.no_grad():
            if self.model64 is not None:
                up = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
                outs = flatten_outputs(self.model64(*up))
                return [o.to(DTYPES[self.opts.precision]) if o.is_floating_point() else o for o in outs]
            return [o.clone() for o in flatten_outputs(self.model(*inputs))]

"""The template Proposer: writes a KernelBench-format module from an API set, with no model.

    from kernelzero.proposer.generator import write_module, SUPPORTED
    source = write_module(("gelu", "layer_norm", "linear"), seed=3)    # None if the set cannot be written

Two uses: a no-model baseline Proposer (`kernelzero proposer propose --model template`), and a source of many
distinct proposals for tests and the admission benchmark. Each API is one step of the forward, written from
the table in genops.py. The steps run on one activation whose layout (features, sequence, signal, image,
volume, see genops.py) only moves forward along volume -> image -> signal -> sequence -> features, with glue
reshapes between layouts; steps that run on any layout are placed at random between the others, and a loss
or distance comes last. Sizes are drawn per module (the seed) at GPU-benchmark scale (millions of elements
per activation); `--scale` in admission shrinks them for CPU runs. Sets holding an API the table lacks, two
final steps, or layouts that cannot follow each other give None.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from typing import Any

from kernelzero.proposer.genops import ANY, OPS, Op, spatial_suffix

SUPPORTED = frozenset(OPS)
_STAGE = {"t": -1, "v": 0, "i": 1, "g": 2, "s": 3, "f": 4}
_START_SIZES = {
    "f": {"batch": (1024, 2048, 4096), "features": (512, 1024, 2048)},
    "s": {"batch": (8, 16, 32), "seq_len": (128, 256, 512), "features": (256, 512, 1024)},
    "g": {"batch": (16, 32), "channels": (32, 64), "length": (1024, 2048, 4096)},
    "i": {"batch": (8, 16, 32), "channels": (16, 32, 64), "height": (64, 128)},
    "v": {"batch": (4, 8), "channels": (8, 16), "depth": (16, 32), "height": (16, 32)},
    "t": {"batch": (8, 16, 32), "seq_len": (128, 256, 512), "vocab_size": (8192, 32000)},
}
_DIMS = {
    "f": ["batch", "features"],
    "s": ["batch", "seq_len", "features"],
    "g": ["batch", "channels", "length"],
    "i": ["batch", "channels", "height", "height"],
    "v": ["batch", "channels", "depth", "height", "height"],
    "t": ["batch", "seq_len"],
}
_NAME = re.compile(r"[A-Za-z_]\w*")


class _CannotWrite(Exception):
    """The plan needs a layout change the writer cannot make."""


class _Writer:
    """The module being written: sizes, __init__ lines, forward lines, inputs."""

    def __init__(self, rng: random.Random, start: str):
        self.rng = rng
        self.sizes: dict[str, int] = {k: rng.choice(v) for k, v in _START_SIZES[start].items()}
        self.layout = start
        self.dims = list(_DIMS[start])
        self.init: list[str] = []
        self.body: list[str] = []
        self.inputs = ["x"]
        self.input_exprs = [self._input_expr(start)]
        self.count = 0

    def _input_expr(self, start: str) -> str:
        if start == "t":
            return "torch.randint(0, vocab_size, (batch, seq_len))"
        if start == "i":
            return "torch.randn(batch, channels, height, height)"
        if start == "v":
            return "torch.randn(batch, channels, depth, height, height)"
        return f"torch.randn({', '.join(self.dims)})"

    def new_size(self, wide: bool) -> str:
        self.count += 1
        name = f"width_{self.count}" if wide else f"channels_{self.count}"
        self.sizes[name] = self.rng.choice((256, 512, 1024) if wide else (16, 32, 64))
        return name

    def target(self, kind: str) -> str:
        name = f"target_{len(self.inputs)}" if len(self.inputs) > 1 else "target"
        shape = ", ".join(self.dims)
        expr = {
            "T": f"torch.randn({shape})",
            "U": f"torch.rand({shape})",
            "S": f"torch.randint(0, 2, ({shape},)).float() * 2 - 1",
        }[kind]
        self.inputs.append(name)
        self.input_exprs.append(expr)
        return name

    def convert(self, to: str) -> None:
        """Glue from the current layout to `to` (a later stage)."""
        cur = self.layout
        if cur == to:
            return
        if _STAGE[to] < _STAGE[cur] or cur == "t":
            raise _CannotWrite(f"{cur} -> {to}")
        if to == "f":
            self.body.append("x = x[:, 0]" if cur == "s" else "x = x.flatten(2)[:, :, 0]")
            self.dims = [self.dims[0], self.dims[1] if cur != "s" else self.dims[2]]
        elif to == "s":
            self.body.append("x = x.flatten(2).transpose(1, 2)" if cur in "iv" else "x = x.transpose(1, 2)")
            spatial = " * ".join(self.dims[2:])
            self.dims = [self.dims[0], f"({spatial})" if len(self.dims) > 3 else spatial, self.dims[1]]
        elif to == "g":
            self.body.append("x = x.flatten(2)")
            self.dims = [*self.dims[:2], f"({' * '.join(self.dims[2:])})"]
        elif to == "i":
            self.body.append("x = x.flatten(2, 3)")
            self.dims = [*self.dims[:2], f"({self.dims[2]} * {self.dims[3]})", self.dims[4]]
        self.layout = to

    def apply(self, name: str, op: Op) -> None:
        self.count += 1
        slots = {
            "x": "x",
            "m": f"{name.split('_')[0]}{self.count}",
            "C": self.dims[1],
            "L": self.dims[1],
            "k": str(self.rng.choice((1, 3, 5))),
            "P": "(x * x + 1.0)",
            "dim": spatial_suffix(self.layout) if self.layout in "giv" else "1d",
            "mode": {"g": "linear", "i": "bilinear"}.get(self.layout, "linear"),
        }
        if "{N}" in op.init or "{N}" in op.forward:
            slots["N"] = self.new_size(wide=self.layout in "fst")
        for kind in "TUS":
            if "{" + kind + "}" in op.forward:
                slots[kind] = self.target(kind)
        init_slots = {**slots, "D": self.dims[-1]}
        self.init += [line.strip().format(**init_slots) for line in op.init.split(";") if line.strip()]
        fwd_slots = {**slots, "D": "x.shape[-1]"}
        self.body += [line.strip().format(**fwd_slots) for line in op.forward.split(";")]
        self._reshape(op.shape, slots.get("N"))

    def _reshape(self, rule: str, new: str | None) -> None:
        for part in filter(None, rule.split(",")):
            if part == "last:N":
                self.dims[-1] = new
            elif part == "last:L":
                self.dims[-1] = self.dims[1]
            elif part == "chan:N":
                self.dims[1] = new
            elif part in ("chan:/4", "chan:*4"):
                self.dims[1] = f"({self.dims[1]} {part[-2:]})".replace("/", "//")
            elif part in ("spatial:/2", "spatial:*2"):
                op = "// 2" if part.endswith("/2") else "* 2"
                self.dims[2:] = [f"({d} {op})" for d in self.dims[2:]]
            elif part in ("drop", "ce"):
                self.dims.pop()
            elif part == "half":
                self.dims[-1] = f"({self.dims[-1]} // 2)"
            elif part == "tokens":
                self.dims.append(new)
                self.layout = "s"

    def source(self, apis: tuple[str, ...]) -> str:
        params = [n for n in self.sizes if any(n in _NAME.findall(line) for line in self.init)]
        lines = [
            "import torch",
            "import torch.nn as nn",
            "import torch.nn.functional as F",
            "",
            "",
            "class Model(nn.Module):",
            f'    """Uses {", ".join(apis)}."""',
            "",
            f"    def __init__(self{''.join(', ' + p for p in params)}):",
            "        super().__init__()",
        ]
        lines += [f"        {line}" for line in self.init]
        lines += ["", f"    def forward(self, {', '.join(self.inputs)}):"]
        lines += [f"        {line}" for line in self.body] + ["        return x", "", ""]
        lines += [f"{name} = {value}" for name, value in self.sizes.items()] + ["", ""]
        lines += ["def get_inputs():"] + [f"    {n} = {e}" for n, e in zip(self.inputs, self.input_exprs)]
        lines += [f"    return [{', '.join(self.inputs)}]", "", "", "def get_init_inputs():"]
        lines += [f"    return [{', '.join(params)}]", ""]
        return "\n".join(lines)


def _plan(apis: tuple[str, ...], rng: random.Random) -> tuple[str, list[tuple[str, str]]] | None:
    """(start layout, [(api, layout to run it on)]) in run order, or None when the set cannot be written."""
    if any(a not in OPS for a in apis) or sum(OPS[a].final for a in apis) > 1:
        return None
    floor = _STAGE["s"] if "embedding" in apis else _STAGE["v"]
    fixed = []
    for api in apis:
        if OPS[api].layouts != ANY and not OPS[api].final:
            options = [c for c in OPS[api].layouts if c == "t" or _STAGE[c] >= floor]
            if not options:
                return None
            fixed.append((api, rng.choice(options)))
    fixed.sort(key=lambda item: (_STAGE[item[1]], rng.random()))
    if "embedding" in apis and fixed[0][0] != "embedding":
        return None
    free = [a for a in apis if OPS[a].layouts == ANY and not OPS[a].final]
    rng.shuffle(free)
    steps = list(fixed)
    lowest = 1 if fixed and fixed[0][1] == "t" else 0
    for api in free:
        steps.insert(rng.randint(lowest, len(steps)), (api, ""))
    finals = [a for a in apis if OPS[a].final]
    steps += [(a, "") for a in finals]
    start = fixed[0][1] if fixed else rng.choice("fsgi")
    if any(OPS[a].final and OPS[a].layouts != ANY for a in finals):
        start_stage = max(_STAGE[start], 0)
        options = [
            c
            for c in OPS[finals[0]].layouts
            if _STAGE[c] >= max((_STAGE[lay] for _, lay in fixed), default=start_stage)
        ]
        if not options:
            return None
        steps[-1] = (finals[0], rng.choice(options))
        if not fixed:
            start = steps[-1][1]
    return start, steps


def write_module(apis: tuple[str, ...] | list[str], seed: int = 0) -> str | None:
    """A KernelBench-format module using every API of `apis` in its forward, or None if the table cannot."""
    apis = tuple(sorted(set(apis)))
    rng = random.Random(f"{'+'.join(apis)}:{seed}")
    plan = _plan(apis, rng)
    if plan is None:
        return None
    start, steps = plan
    writer = _Writer(rng, start)
    try:
        for api, layout in steps:
            if layout:
                writer.convert(layout)
            elif writer.layout == "t":
                return None
            writer.apply(api, OPS[api])
    except _CannotWrite:
        return None
    return writer.source(apis)


def template_modules(
    pool: Iterable[dict[str, Any]], count: int, variants: int = 1
) -> list[tuple[list[str], list[tuple[int, str]]]]:
    """The template proposals a tiny Proposer is warm-started on: for each of the first `count` API sets of `pool`
    (rows with "apis") that this writer writes, its distinct modules of seeds 0..variants-1 as (seed, source), a
    module an earlier seed wrote left out. The Coder's warm-start templates (train/template_kernels.py) are these."""
    out: list[tuple[list[str], list[tuple[int, str]]]] = []
    for entry in pool:
        if len(out) >= count:
            break
        modules: dict[str, int] = {}
        for seed in range(variants):
            source = write_module(entry["apis"], seed)
            if seed == 0 and source is None:
                break
            if source and source not in modules:
                modules[source] = seed
        if modules:
            out.append((list(entry["apis"]), [(seed, source) for source, seed in modules.items()]))
    return out


def completion_for(apis: tuple[str, ...] | list[str], seed: int = 0) -> str:
    """What the template Proposer "answers": the module in a python fence, or a refusal line."""
    source = write_module(apis, seed)
    if source is None:
        return f"The template generator cannot write a module for {', '.join(sorted(apis))}."
    return f"```python\n{source}```\n"

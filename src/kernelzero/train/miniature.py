"""Miniature tasks for training from scratch: compositions of elementwise and reduction ops, each paired
with a correct Triton kernel that this module writes.

No pretrained code model can be loaded on the project's machines, so the Coder loop is shown to learn with a
small model trained here: it is first fitted (supervised) on part of these tasks, then trained with CA-GRPO
on tasks it has not seen. A task is a KernelBench-format module whose forward is a short chain of steps on
`x` (scale, shift, relu, sigmoid, abs, square, silu, exp, clamp, and binary steps with a second input `y`:
add, sub, mul, maximum), optionally followed by a sum, mean or max over dim 1. The matching kernel runs the
same chain in one fused Triton kernel (one program per block of elements, or one per row for a reduction),
step for step, so the mapping from reference to kernel is learnable yet never copied verbatim.

    from kernelzero.train.miniature import make_tasks, write_split
    tasks = make_tasks(200, seed=0, rows=64, cols=256)     # list[MiniTask], distinct forwards
    write_split(tasks[:50], Path("runs/mini/test.jsonl"))   # a suite file `kernelzero eval` can load

`make_splits` draws splits whose held-out split shares no API set (a task's ops, order and constants aside, and its
reduction) with the others, so a held-out task's combination of APIs was never trained on (issue 24 item 1: disjoint
by hash and by API set).

Every task is checked by tests (CPU, Triton's interpreter) to pass `kernelzero verify` with its kernel.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# name -> (reference line, kernel line); "{c}" is a constant drawn per step
UNARY = {
    "scale": ("x = x * {c}", "x = x * {c}"),
    "shift": ("x = x + {c}", "x = x + {c}"),
    "relu": ("x = torch.relu(x)", "x = tl.maximum(x, 0.0)"),
    "sigmoid": ("x = torch.sigmoid(x)", "x = tl.sigmoid(x)"),
    "abs": ("x = torch.abs(x)", "x = tl.abs(x)"),
    "square": ("x = x * x", "x = x * x"),
    "silu": ("x = F.silu(x)", "x = x * tl.sigmoid(x)"),
    "exp": ("x = torch.exp(x)", "x = tl.exp(x)"),
    "clamp": ("x = torch.clamp(x, min=-{c}, max={c})", "x = tl.minimum(tl.maximum(x, -{c}), {c})"),
}
BINARY = {
    "add": ("x = x + y", "x = x + y"),
    "sub": ("x = x - y", "x = x - y"),
    "mul": ("x = x * y", "x = x * y"),
    "maximum": ("x = torch.maximum(x, y)", "x = tl.maximum(x, y)"),
}
# name -> (reference return, value masked lanes take before reducing, kernel reduction)
REDUCTIONS = {
    "sum": ("torch.sum(x, dim=1)", "0.0", "tl.sum(x, axis=0)"),
    "mean": ("torch.mean(x, dim=1)", "0.0", "tl.sum(x, axis=0) / n_cols"),
    "max": ("torch.amax(x, dim=1)", 'float("-inf")', "tl.max(x, axis=0)"),
}
CONSTANTS = {"scale": ("0.5", "2.0", "1.5", "-1.0", "3.0"), "shift": ("1.0", "-0.5", "2.0"), "clamp": ("1.0", "0.5")}


@dataclass(frozen=True)
class MiniTask:
    """One generated task and its reference solution."""

    name: str  # "mini_00012"
    steps: tuple[tuple[str, str], ...]  # (op, constant or "") in order
    reduction: str  # "" or one of REDUCTIONS
    source: str  # the KernelBench-format reference module
    solution: str  # a ModelNew with one fused Triton kernel, correct by construction

    @property
    def two_inputs(self) -> bool:
        return any(op in BINARY for op, _ in self.steps)


def _lines(steps: tuple[tuple[str, str], ...], column: int) -> list[str]:
    table = {**UNARY, **BINARY}
    return [table[op][column].format(c=c) for op, c in steps]


def _describe(steps: tuple[tuple[str, str], ...], reduction: str) -> str:
    words = [f"{op} {c}".strip() if op != "clamp" else f"clamp to +-{c}" for op, c in steps]
    text = ", then ".join(words)
    return f"{text}, then the {reduction} over dim 1." if reduction else f"{text}, elementwise."


def reference_source(steps: tuple[tuple[str, str], ...], reduction: str, rows: int, cols: int) -> str:
    """The reference module (KernelBench format) of a chain of steps."""
    two = any(op in BINARY for op, _ in steps)
    args = "x, y" if two else "x"
    body = "\n".join(f"        {line}" for line in _lines(steps, 0))
    ret = REDUCTIONS[reduction][0] if reduction else "x"
    inputs = ", ".join(["torch.randn(rows, cols)"] * (2 if two else 1))
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n"
        f'    """{_describe(steps, reduction).capitalize()}"""\n\n'
        "    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, {args}):\n{body}\n        return {ret}\n\n\n"
        f"rows = {rows}\ncols = {cols}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def _elementwise_kernel(lines: list[str], two: bool) -> str:
    ptrs = "x_ptr, y_ptr, out_ptr" if two else "x_ptr, out_ptr"
    loads = "    x = tl.load(x_ptr + offsets, mask=mask)\n"
    loads += "    y = tl.load(y_ptr + offsets, mask=mask)\n" if two else ""
    body = "".join(f"    {line}\n" for line in lines)
    args, call = ("x, y", "x, y, out") if two else ("x", "x, out")
    cont = "        x = x.contiguous()\n" + ("        y = y.contiguous()\n" if two else "")
    return (
        "@triton.jit\n"
        f"def fused_kernel({ptrs}, n_elements, BLOCK_SIZE: tl.constexpr):\n"
        "    pid = tl.program_id(0)\n"
        "    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n"
        "    mask = offsets < n_elements\n"
        f"{loads}{body}"
        "    tl.store(out_ptr + offsets, x, mask=mask)\n\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, {args}):\n{cont}"
        "        out = torch.empty_like(x)\n"
        "        n_elements = x.numel()\n"
        "        BLOCK_SIZE = 1024\n"
        "        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)\n"
        f"        fused_kernel[grid]({call}, n_elements, BLOCK_SIZE=BLOCK_SIZE)\n"
        "        return out\n"
    )


def _reduction_solution(steps: tuple[tuple[str, str], ...], two: bool, reduction: str) -> str:
    ptrs = "x_ptr, y_ptr, out_ptr" if two else "x_ptr, out_ptr"
    loads = "    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)\n"
    loads += "    y = tl.load(y_ptr + row * n_cols + cols, mask=mask)\n" if two else ""
    body = "".join(f"    {line}\n" for line in _lines(steps, 1))
    _, neutral, reduce = REDUCTIONS[reduction]
    args, call = ("x, y", "x, y, out") if two else ("x", "x, out")
    cont = "        x = x.contiguous()\n" + ("        y = y.contiguous()\n" if two else "")
    return (
        "@triton.jit\n"
        f"def fused_kernel({ptrs}, n_cols, BLOCK_SIZE: tl.constexpr):\n"
        "    row = tl.program_id(0)\n"
        "    cols = tl.arange(0, BLOCK_SIZE)\n"
        "    mask = cols < n_cols\n"
        f"{loads}{body}"
        f"    x = tl.where(mask, x, {neutral})\n"
        f"    tl.store(out_ptr + row, {reduce})\n\n\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        f"    def forward(self, {args}):\n{cont}"
        "        n_rows, n_cols = x.shape\n"
        "        out = torch.empty(n_rows, device=x.device, dtype=x.dtype)\n"
        "        BLOCK_SIZE = triton.next_power_of_2(n_cols)\n"
        f"        fused_kernel[(n_rows,)]({call}, n_cols, BLOCK_SIZE=BLOCK_SIZE)\n"
        "        return out\n"
    )


_HEAD = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"


def elementwise_solution(lines: list[str], two: bool) -> str:
    """A ModelNew running the kernel `lines` (each updating `x`; `y` the second input when `two`) in one fused
    elementwise Triton kernel."""
    return _HEAD + _elementwise_kernel(lines, two)


def solution_source(steps: tuple[tuple[str, str], ...], reduction: str) -> str:
    """A ModelNew computing the chain in one fused Triton kernel."""
    two = any(op in BINARY for op, _ in steps)
    if reduction:
        return _HEAD + _reduction_solution(steps, two, reduction)
    return elementwise_solution(_lines(steps, 1), two)


def _draw_steps(rng: random.Random, max_steps: int) -> tuple[tuple[str, str], ...]:
    steps: list[tuple[str, str]] = []
    for _ in range(rng.randint(1, max_steps)):
        names = list(UNARY) + list(BINARY)
        if any(op == "exp" for op, _ in steps):
            names.remove("exp")  # exp of exp overflows float32
        op = rng.choice(names)
        steps.append((op, rng.choice(CONSTANTS[op]) if op in CONSTANTS else ""))
    return tuple(steps)


def _forwards(seed: int, max_steps: int, tries: int) -> Iterator[tuple[tuple[tuple[str, str], ...], str]]:
    """(steps, reduction) of each distinct forward drawn from `seed`, in order, in at most `tries` draws (a repeat is
    skipped); the caller stops drawing when it has what it needs."""
    rng = random.Random(seed)
    seen: set[tuple] = set()
    for _ in range(tries):
        steps = _draw_steps(rng, max_steps)
        reduction = rng.choice(("", "") + tuple(REDUCTIONS))
        if (steps, reduction) not in seen:
            seen.add((steps, reduction))
            yield steps, reduction


def _task(index: int, steps: tuple[tuple[str, str], ...], reduction: str, rows: int, cols: int) -> MiniTask:
    source, solution = reference_source(steps, reduction, rows, cols), solution_source(steps, reduction)
    return MiniTask(f"mini_{index:05d}", steps, reduction, source, solution)


def make_tasks(count: int, seed: int = 0, rows: int = 64, cols: int = 256, max_steps: int = 4) -> list[MiniTask]:
    """`count` tasks with pairwise distinct forwards, drawn from `seed` (the same arguments give the same list)."""
    if count < 1 or rows < 1 or cols < 1 or max_steps < 1:
        raise ValueError(f"count, rows, cols and max_steps must be >= 1, got {count}, {rows}, {cols}, {max_steps}")
    tasks: list[MiniTask] = []
    for steps, reduction in _forwards(seed, max_steps, count * 50):
        tasks.append(_task(len(tasks), steps, reduction, rows, cols))
        if len(tasks) == count:
            return tasks
    raise ValueError(f"only {len(tasks)} distinct tasks fit max_steps={max_steps}; asked for {count}")


def tasks_named(names: list[str], seed: int = 0, rows: int = 64, cols: int = 256, max_steps: int = 4) -> dict:
    """The tasks `mini_NNNNN` of a draw, whichever split they went to (a name is its forward's place in the draw of
    `seed`, the same in `make_tasks` and `make_splits`): name -> MiniTask."""
    want = {int(n.rsplit("_", 1)[1]) for n in names}
    out: dict[str, MiniTask] = {}
    for index, (steps, reduction) in enumerate(_forwards(seed, max_steps, (max(want, default=0) + 1) * 200)):
        if index in want:
            out[f"mini_{index:05d}"] = _task(index, steps, reduction, rows, cols)
        if len(out) == len(want):
            break
    return out


def _api_key(steps: tuple[tuple[str, str], ...], reduction: str) -> tuple[str, ...]:
    return tuple(sorted({op for op, _ in steps})) + ((reduction,) if reduction else ())


def api_set(task: MiniTask) -> tuple[str, ...]:
    """The torch APIs a task's forward uses, order and constants aside: its distinct ops, then its reduction."""
    return _api_key(task.steps, task.reduction)


def _bucket(seed: int, key: tuple[str, ...]) -> float:
    """A uniform number in [0, 1) fixed by the seed and the API set."""
    digest = hashlib.sha256(f"{seed}:{','.join(key)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def make_splits(
    sizes: dict[str, int],
    seed: int = 0,
    rows: int = 64,
    cols: int = 256,
    max_steps: int = 4,
    held_out: str = "test",
    apart: tuple[str, ...] = (),
) -> dict[str, list[MiniTask]]:
    """Splits of the given sizes (name -> count) whose tasks have pairwise distinct forwards, the `held_out` split's
    API sets (`api_set`) disjoint from every other split's, and so each split named in `apart`'s: each API set goes
    to one of these splits or to the rest by a seeded hash (each with its split's share of the tasks, at least 10%),
    and the other splits share theirs. Each split is a seeded random sample of the forwards drawn, not the first
    ones with room: a short forward has few distinct variants and runs out early in the draw, so taking splits in
    draw order gave the first-filled splits most of the short tasks (on the miniature's 3,000 + 256 + 64, 1 in 115
    warm-start tasks had one step against 1 in 7 GRPO tasks and 1 in 5 held-out tasks). Names are numbered in the
    order drawn (`mini_00000`, ...). The same arguments give the same splits; raises when the sizes cannot be
    filled."""
    groups = (held_out, *[a for a in apart if a != held_out])
    if any(g not in sizes for g in groups) or any(n < 0 for n in sizes.values()) or sum(sizes.values()) < 1:
        names = ", ".join(repr(g) for g in groups)
        raise ValueError(f"split sizes must be >= 0 with at least one task and name {names}, got {sizes}")
    if rows < 1 or cols < 1 or max_steps < 1:
        raise ValueError(f"rows, cols and max_steps must be >= 1, got {rows}, {cols}, {max_steps}")
    edges, top = {}, 0.0
    for g in groups:  # an API set hashed in [the previous group's edge, edges[g]) is g's; above the last, the rest's
        top += max(sizes[g] / sum(sizes.values()), 0.1) if sizes[g] else 0.0
        edges[g] = top
    need = {g: sizes[g] for g in groups} | {None: sum(n for name, n in sizes.items() if name not in groups)}
    if top >= 1.0 and need[None]:
        raise ValueError(f"the splits kept apart ({groups}) leave no API sets to the others: ask for fewer")
    pools: dict[str | None, list[tuple[int, tuple, str]]] = {g: [] for g in need}
    for index, (steps, reduction) in enumerate(_forwards(seed, max_steps, sum(sizes.values()) * 200)):
        b = _bucket(seed, _api_key(steps, reduction))
        g = next((g for g in groups if b < edges[g]), None)
        if len(pools[None]) < need[None] or (g is not None and need[g]):
            pools[g].append((index, steps, reduction))  # the apart pools span the shared pool's draws
        if all(len(pools[k]) >= need[k] for k in need):
            break
    if any(len(pools[k]) < need[k] for k in need):
        got = {k or "the rest": len(v) for k, v in pools.items()}
        raise ValueError(f"only {got} tasks with {groups}'s API sets apart fit max_steps={max_steps}; asked {sizes}")
    rng = random.Random(f"splits:{seed}")
    chosen = {g: rng.sample(pools[g], need[g]) for g in need}  # held-out first, as the splits were drawn before
    out = {g: [_task(i, st, r, rows, cols) for i, st, r in sorted(chosen[g])] for g in groups}
    taken = 0
    for name, n in sizes.items():
        if name not in groups:
            out[name] = [_task(i, st, r, rows, cols) for i, st, r in sorted(chosen[None][taken : taken + n])]
            taken += n
    return {name: out[name] for name in sizes}


def draw_splits(t: Any) -> dict[str, list[MiniTask]]:
    """The test, rl and sft splits a run's `tasks` config (config.TaskConfig) asks for: API-set disjoint
    (`make_splits`) with `disjoint: api_set` (test apart) or `api_set_rl` (test and rl apart), else a seeded random
    partition of one `make_tasks` draw (not its consecutive slices: the draw's first tasks are the shortest, see
    `make_splits`)."""
    sizes = {"test": t.n_test, "rl": t.n_rl, "sft": t.n_sft}
    if t.disjoint in ("api_set", "api_set_rl"):
        apart = ("rl",) if t.disjoint == "api_set_rl" else ()
        return make_splits(sizes, seed=t.seed, rows=t.rows, cols=t.cols, max_steps=t.max_steps, apart=apart)
    tasks = make_tasks(sum(sizes.values()), seed=t.seed, rows=t.rows, cols=t.cols, max_steps=t.max_steps)
    order = random.Random(f"splits:{t.seed}").sample(range(len(tasks)), len(tasks))
    cuts = [0, t.n_test, t.n_test + t.n_rl, len(tasks)]
    return {name: [tasks[i] for i in sorted(order[a:b])] for name, a, b in zip(sizes, cuts, cuts[1:])}


def tokenizer_code(t: Any, splits: dict, solutions: dict[str, str]) -> list[str]:
    """Code the tokenizer's merges are fitted on (`t`: the run's config.TaskConfig): every split's solutions and more
    of the generator's tasks, so common code words merge; with API-set-disjoint splits only the training splits'
    solutions, so nothing of the held-out split (its solutions, or a generated task of its API sets) shapes even the
    vocabulary."""
    if t.disjoint == "api_set":
        training = {task.name for task in splits["sft"] + splits["rl"]}
        return [code for name, code in solutions.items() if name in training]
    extra = make_tasks(256, seed=t.seed + 1, rows=t.rows, cols=t.cols, max_steps=t.max_steps)
    return list(solutions.values()) + [x.solution for x in extra] + [x.source for x in extra]


def answer_text(task: MiniTask) -> str:
    """The assistant message that answers a task: its solution in one python block."""
    return f"```python\n{task.solution}```"


def write_split(tasks: list[MiniTask], path: Path) -> Path:
    """Write tasks as a suite file in the KernelBench dataset's columns (level 1), with their solutions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for t in tasks:
            row = {"name": t.name, "code": t.source, "level": 1, "problem_id": int(t.name.split("_")[1])}
            f.write(json.dumps({**row, "solution": t.solution}) + "\n")
    return path


def read_solutions(path: Path) -> dict[str, str]:
    """Task name (as the suite loader names it, `level1/<name>`) -> solution, from a `write_split` file."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[f"level{row['level']}/{row['name']}"] = row["solution"]
    return out

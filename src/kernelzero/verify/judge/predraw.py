"""Input sets drawn before the GPU is held alone (issue 26 item 3): opt-in with `KZ_PREDRAW=1` until gated on a GPU.

Why. A timed verification holds the GPU alone (`lease.exclusive_gpu`) and the pool's verifications take that window
one at a time, so every second inside it is paid by all of them. On the H200 at 92a41dc (bench/service.md, sixteenth
session) the window lasted a median 0.58 s per timed sample, 0.15 s of it drawing each block's fresh input sets in
the reference's process (`blocks_draw`): about a quarter of the serial window, spent on work that needs no GPU alone.

What. `predraw(judge)` runs under the shared lease, just before the window: it draws the first timing's probe set
(and keeps the size of the reference's outputs on it, which plans the blocks: `interleaved` asks no forward for it),
and, where every set of the timing, counted as `plan_calls` counts a block's (its inputs and outputs, each twice),
fits `PREDRAW_BYTES` (small tasks, where the draw is most of a block's cost; the GPU then never holds more of them
than one block did before), every set its blocks and audits will ask for, in the order they ask (`draw_counts`, from
`timing_stage.block_plan`, the plan `interleaved` follows). They go to `judge.predrawn`; `timing_stage._draw` hands
them out first, then draws as before. Each set keeps the seed it would have had (consecutive draws take consecutive
seeds), so a verdict's inputs are the same with or without it; a plan that differs only costs draws inside the
window again. The kernelbench profile's one set is drawn before the window already (`prime_inputs`); CPU
verifications are not timed.

Boundaries. The sets are the judge's, drawn from its secret seed in the reference's process as before; the candidate
sees a set only when its block is sent, as before. Nothing is drawn that the timing would not have drawn.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kernelzero.verify.judge.timing_stage import BLOCK_BYTES, _bytes_of, _draw, block_plan, plan_calls

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge

ENV = "KZ_PREDRAW"
PREDRAW_BYTES = BLOCK_BYTES  # all sets of a timing drawn ahead only where they fit what one block may hold


def enabled() -> bool:
    """Whether input sets are drawn before the exclusive window (`KZ_PREDRAW`: 1 on, 0 or unset off)."""
    raw = os.environ.get(ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{ENV} must be 0 or 1, got {raw!r}")
    return raw == "1"


def draw_counts(warmup_calls: int, calls: int, per_block: int) -> list[int]:
    """The sizes of the draws one interleaved timing makes after its probe, in order: per block its sets (warm-ups and
    timed calls) then its audits (`timing_stage.block_plan`, the plan `interleaved` follows)."""
    return [n for m, warmup, audits in block_plan(warmup_calls, calls, per_block) for n in (warmup + m, audits)]


def predraw(judge: Judge) -> int:
    """Draw the first timing's input sets into `judge.predrawn` (see the module docstring); the number drawn (0 when
    off, on the CPU, under a one-set profile, or before a timing that already drew)."""
    if not enabled() or judge.device != "cuda" or judge.opts.input_sets != 0 or judge.draws:
        return 0
    probe = _draw(judge, 1)[0]
    expected = judge.ref.expected(probe, judge.run_timeout())
    set_bytes, out_bytes = _bytes_of(probe), _bytes_of(expected)
    calls, per_block = plan_calls(judge, set_bytes, out_bytes)
    total = sum(draw_counts(judge.opts.warmup_calls, calls, per_block))
    ahead = _draw(judge, total) if (total + 1) * 2 * (set_bytes + out_bytes) <= PREDRAW_BYTES else []
    judge.predrawn = [probe, *ahead]
    judge.predrawn_out_bytes = (probe, out_bytes)  # the timing's plan needs no reference call in the window
    return len(judge.predrawn)

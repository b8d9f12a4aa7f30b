"""Eager time of every task of a suite at its sizes, on the GPU, plus the strict contract check there.

    PYTHONPATH=src python bench/tasks_eager.py kz-basic --out bench/tasks_kz_basic_h200.md

Each task: the reference built in eval mode on cuda, 3 warm-up calls, 20 timed calls with the L2
flushed before each (kernelzero.verify.worker.timing), median and p10/p90 in ms. Then `check_tasks`
(strict: a degenerate output fails) at the same sizes on cuda.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path

import preflight  # bench/preflight.py: what this call needs, checked first
import torch

from kernelzero.tasks import CheckOptions, check_tasks, load_suite
from kernelzero.tasks.module import load_reference
from kernelzero.verify.worker.seal import TIMED_CALL
from kernelzero.verify.worker.timing import summarise, sync_and_clock, time_calls


def eager_ms(task) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ref = load_reference(task.source, task.sizes, Path(tmp, "t.py"))
        torch.manual_seed(0)
        model = ref.model_cls(*ref.get_init_inputs()).eval().cuda()
        torch.manual_seed(1)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]

        def call(_: int, probe: tuple | None, model=model, inputs=inputs) -> None:
            with torch.no_grad():
                if probe is None:
                    model(*inputs)
                else:  # the verifier's timed call (worker/timing.py), on this thread
                    TIMED_CALL(model, inputs, probe[0], probe[1], *sync_and_clock(), probe[2])

        t = summarise(time_calls(call, [0] * 20, 3, "cuda"))
        del model, inputs
        torch.cuda.empty_cache()
        return t.median_ms, t.p10_ms, t.p90_ms


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("suite")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    preflight.require(gpus=1)
    tasks = load_suite(args.suite).tasks
    checks = {r.name: r for r in check_tasks(tasks, CheckOptions(device="cuda", strict=True, timeout_s=300))}
    lines = ["| task | eager median ms | p10 | p90 | strict check (cuda, bench sizes) |", "|---|---|---|---|---|"]
    slow = 0
    for task in tasks:
        med, p10, p90 = eager_ms(task)
        slow += med >= 0.1
        c = checks[task.name]
        status = "ok" if c.ok else f"FAIL {c.error}: {c.message[:80]}"
        lines.append(f"| {task.name} | {med:.3f} | {p10:.3f} | {p90:.3f} | {status} |")
        print(lines[-1], flush=True)
    head = (
        f"{args.suite} eager times at bench sizes, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"{datetime.date.today()}; {slow}/{len(tasks)} tasks at >= 0.1 ms; "
        f"{sum(c.ok for c in checks.values())}/{len(tasks)} pass the strict check on cuda.\n"
    )
    args.out.write_text(head + "\n" + "\n".join(lines) + "\n")
    print(head)
    return 0


if __name__ == "__main__":
    sys.exit(main())

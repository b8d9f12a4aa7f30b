"""Serving judges (verify/judge/serving.py, turns.py, standby.py) on the CPU, real judge and worker processes: a
standby judge serves requests in turn, each candidate in a fresh worker that finds no trace of the one before; it
keeps the task's reference process only for the same task and options, and says so; it ends after a verdict that
says a process went wrong, and its standby starts another in its place."""

from __future__ import annotations

import time
from pathlib import Path

from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for, verify
from kernelzero.verify.judge.serving import KEPT_NOTE
from kernelzero.verify.judge.standby import Standby

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
# a candidate that fails when anything of an earlier candidate is left: a flag in its interpreter, a file in its folder
MARKED = """import builtins, os
if getattr(builtins, "_kz_seen", False) or os.path.exists("kz_seen"):
    raise RuntimeError("a trace of an earlier candidate")
builtins._kz_seen = True
open("kz_seen", "w").close()
"""


def _task(name: str):
    (task,) = select(load_suite("kz-basic").tasks, names=[name])
    return resize(task, preset="smoke")


def _ready(standby: Standby, count: int = 1, timeout_s: float = 60.0) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with standby.lock:
            procs = [p for ready in standby.ready.values() for p in ready]
        if len(procs) >= count:
            return procs
        time.sleep(0.05)
    raise AssertionError(f"{count} standby judges were not ready in {timeout_s} s")


def _kept(verdict) -> bool:
    return KEPT_NOTE in verdict.notes


def test_a_serving_judge_serves_its_requests_each_in_a_fresh_worker_and_keeps_the_reference():
    task = _task("level1/21_GELU")
    good = MARKED + (KERNELS / "correct" / "triton_gelu.py").read_text()
    opts = options_for(compile_check=False, static_checks=False)
    standby = Standby(1, serves=3)
    try:
        assert verify(task, good, "triton", opts, standby=standby).status == "correct"  # cold: it primes the standby
        (judge,) = _ready(standby)
        served = [verify(task, good, "triton", opts, standby=standby) for _ in range(3)]
        assert [v.status for v in served] == ["correct"] * 3, [v.message for v in served]
        assert [_kept(v) for v in served] == [False, True, True]  # the same task and options from the second on
        assert standby.taken == 3 and standby.again == 2
        assert judge.wait(timeout=60) == 0  # it served its three requests and ended
        (fresh,) = _ready(standby)  # asked for when its last request was taken
        assert fresh is not judge
    finally:
        standby.close()


def test_a_kept_reference_serves_only_its_own_task_and_options():
    gelu, relu = _task("level1/21_GELU"), _task("level1/24_LeakyReLU")
    gelu_src = (KERNELS / "correct" / "triton_gelu.py").read_text()
    relu_src = (KERNELS / "correct" / "triton_leaky_relu.py").read_text()
    opts = options_for(compile_check=False)
    looser = options_for(compile_check=False, atol=2e-2)
    standby = Standby(1, serves=5)
    try:
        verify(gelu, gelu_src, "triton", opts, standby=standby)
        _ready(standby)
        order = [(gelu, gelu_src, opts), (relu, relu_src, opts), (relu, relu_src, opts), (relu, relu_src, looser)]
        served = [verify(task, src, "triton", o, standby=standby) for task, src, o in order]
        assert [v.status for v in served] == ["correct"] * 4, [v.message for v in served]
        assert [_kept(v) for v in served] == [False, False, True, False]
        assert standby.again == 3
    finally:
        standby.close()


def test_a_serving_judge_ends_after_a_crash_and_another_takes_its_place():
    task = _task("level1/21_GELU")
    good = (KERNELS / "correct" / "triton_gelu.py").read_text()
    dies = good + "\nimport os\nos._exit(3)\n"  # the worker ends at import without a result
    opts = options_for(compile_check=False, static_checks=False)
    standby = Standby(1, serves=4)
    try:
        verify(task, good, "triton", opts, standby=standby)
        (judge,) = _ready(standby)
        assert verify(task, good, "triton", opts, standby=standby).status == "correct"
        crashed = verify(task, dies, "triton", opts, standby=standby)
        assert crashed.status == "crash", crashed.message
        assert judge.wait(timeout=60) == 0  # it answered `last` and ended, with two of its four requests left
        after = verify(task, good, "triton", opts, standby=standby)  # a judge started in its place
        assert after.status == "correct" and not _kept(after), after.notes
        assert standby.again == 1 and standby.started >= 2
    finally:
        standby.close()

"""Standby judges (verify/judge/standby.py) on the CPU: a ready judge gives the verdict a cold one gives, one that
died waiting is replaced, a request with another sandbox gets a fresh worker, and close() ends them all."""

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for, verify
from kernelzero.verify.judge.standby import Standby

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _case(name: str = "triton_gelu.py"):
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    return resize(task, preset="smoke"), (KERNELS / name).read_text()


def _wait_started(standby: Standby, count: int, timeout_s: float = 60.0) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with standby.lock:
            procs = [p for ready in standby.ready.values() for p in ready]
        if len(procs) >= count:
            return procs
        time.sleep(0.05)
    raise AssertionError(f"{count} standby judges did not start in {timeout_s} s")


def test_a_standby_judge_gives_the_cold_verdict_and_serves_one_request():
    task, good = _case("correct/triton_gelu.py")
    wrong = (KERNELS / "wrong" / "triton_gelu_half_output.py").read_text()
    opts = options_for(compile_check=False)
    standby = Standby(1)
    try:
        cold = verify(task, good, "triton", opts, standby=standby)  # none ready: started cold, one standby started
        assert cold.status == "correct", cold.message
        (ready,) = _wait_started(standby, 1)
        warm = verify(task, good, "triton", opts, standby=standby)
        assert standby.taken == 1 and ready.wait(timeout=60) == 0  # it served this request and exits
        assert warm.status == cold.status and warm.candidate_hash == cold.candidate_hash
        assert warm.timing is None or warm.timing.mean_ms > 0
        _wait_started(standby, 1)
        assert verify(task, wrong, "triton", opts, standby=standby).status == "dtype_mismatch"
        assert standby.taken == 2
    finally:
        standby.close()


class _Given:
    """Hands out one given process, whatever is asked for."""

    def __init__(self, proc):
        self.proc = proc

    def take(self, env, opts, on_gpu):
        proc, self.proc = self.proc, None
        return proc


def test_a_standby_given_a_request_with_another_sandbox_judges_it_with_a_fresh_worker():
    task, good = _case("correct/triton_gelu.py")
    opts = options_for(compile_check=False)
    standby = Standby(1)
    try:
        verify(task, good, "triton", opts, standby=standby)
        (ready,) = _wait_started(standby, 1)
        with standby.lock:
            standby.ready.clear()  # taken out by hand, for a request its sandbox does not match
        other = replace(opts, host_mem_gb=opts.host_mem_gb + 1)
        verdict = verify(task, good, "triton", other, standby=_Given(ready))
        assert verdict.status == "correct", verdict.message
        assert not any(n.startswith("standby worker") for n in verdict.notes), verdict.notes  # not the warmed one
        assert ready.wait(timeout=60) == 0
    finally:
        standby.close()


def test_a_standby_that_died_waiting_is_replaced_and_the_request_still_judged():
    task, good = _case("correct/triton_gelu.py")
    opts = options_for(compile_check=False)
    standby = Standby(1)
    try:
        assert standby.take({"A": "1"}, opts, False) is None  # primes one for this environment
        (ready,) = _wait_started(standby, 1)
        os.killpg(ready.pid, signal.SIGKILL)
        ready.wait()
        assert standby.take({"A": "1"}, opts, False) is None  # the dead one is dropped, not handed out
        (fresh,) = _wait_started(standby, 1)
        assert fresh is not ready and fresh.poll() is None
        other = replace(opts, host_mem_gb=opts.host_mem_gb + 1)  # another sandbox: not served by this one
        assert standby.take({"A": "1"}, other, False) is None and fresh.poll() is None
        assert verify(task, good, "triton", opts, standby=standby).status == "correct"
    finally:
        standby.close()


def test_close_ends_every_standby_judge():
    opts = options_for(compile_check=False)
    standby = Standby(2)
    standby.take({"A": "1"}, opts, False)
    procs = _wait_started(standby, 2)
    time.sleep(3)  # let them start their workers
    standby.close()
    assert all(p.poll() is not None for p in procs)
    assert standby.take({"A": "1"}, opts, False) is None


def test_the_pool_uses_standby_judges():
    task, good = _case("correct/triton_gelu.py")
    opts = options_for(compile_check=False)
    requests = [VerifyRequest(task, good + f"\n# variant {i}\n", "triton", opts, tag=i) for i in range(2)]
    results = {
        r.tag: v for r, v in verify_many(requests, jobs=1, standby=1)
    }  # one at a time: the first starts a standby
    assert all(v.status == "correct" for v in results.values()), [v.message for v in results.values()]
    second = results[1]
    assert any(n.startswith("standby worker: dispatch") for n in second.notes), second.notes

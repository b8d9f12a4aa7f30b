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


def _wait_started(standby: Standby, count: int = 1, timeout_s: float = 60.0) -> list:
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
    standby = Standby(1, serves=1)
    try:
        cold = verify(task, good, "triton", opts, standby=standby)  # none ready: started cold, one standby started
        assert cold.status == "correct", cold.message
        # each verdict says its processes' CPU seconds (bench/service.md: the pool is CPU-bound), in all and by the
        # worker's command: a process forked from the fork server did not import torch (zygote.py), a cold one did
        seconds = cold.stage_seconds
        cpu = {role: seconds[f"cpu_s_{role}"] for role in ("judge", "ref", "cand")}
        assert min(cpu.values()) > 0, seconds
        for role in ("judge", "ref", "cand"):
            assert seconds[f"forked_{role}"] == 1.0 or cpu[role] > 0.2, seconds
        for role in ("ref", "cand"):
            by_command = {k: v for k, v in seconds.items() if k.startswith(f"cpu_s_{role}_")}
            assert "cpu_s_cand_import" in seconds and 0 < sum(by_command.values()) <= cpu[role] + 0.01, seconds
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

    def take(self, env, opts, on_gpu, affinity=None):
        proc, self.proc = self.proc, None
        return proc

    def returned(self, proc, again, served=None):
        return False


def test_a_standby_given_a_request_with_another_sandbox_judges_it_with_a_fresh_worker():
    task, good = _case("correct/triton_gelu.py")
    opts = options_for(compile_check=False)
    standby = Standby(1, serves=1)
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
    standby = Standby(1, serves=1)
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


AGED_TASK = """
import os

import torch


def _age_s():
    start_ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
    return float(open("/proc/uptime").read().split()[0]) - start_ticks / os.sysconf("SC_CLK_TCK")


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.ones(64)]


def get_init_inputs():
    if _age_s() > 15:
        raise RuntimeError(f"reference process age {_age_s():.1f} s")
    return []
"""

DOUBLE = """
import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return out
"""


def test_a_standby_judge_brings_its_reference_process_started_before_the_request():
    """The standby's reference process (started, torch imported, before any request) gets the request's task. The
    task's code fails in a process older than 15 s: a cold judge's young reference passes; a standby's, over 17 s old,
    fails, and works again in the clean retry's fresh process (so the verdict blames the candidate). A task the
    standby cannot write is judged as a cold judge judges it."""
    from kernelzero.types import Task

    task = Task(name="aged", source=AGED_TASK)
    opts = options_for(compile_check=False)
    standby = Standby(1, serves=1)
    try:
        cold = verify(task, DOUBLE, "triton", opts, standby=standby)  # none ready: cold; the kind's standby starts
        assert cold.status == "correct", cold.message
        _wait_started(standby, 1)
        time.sleep(17.0)
        warm = verify(task, DOUBLE, "triton", opts, standby=standby)
        assert standby.taken == 1 and "reference process age" in warm.message, (warm.status, warm.message)
        _wait_started(standby, 1)
        downloads = Task(name="dl", source=AGED_TASK + "\nAutoModel.from_pretrained('gpt2')\n")
        broken = verify(downloads, DOUBLE, "triton", opts, standby=standby)
        assert standby.taken == 2 and broken.status == "task_broken" and "needs_download" in broken.message
    finally:
        standby.close()

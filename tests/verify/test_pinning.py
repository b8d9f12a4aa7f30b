"""One core for a timing window (verify/judge/pinning.py): with KZ_PIN_TIMING=1 every thread of the judge's process
and of the workers' process groups runs on the chosen CPUs inside the block and where it ran before after it; unset,
nothing moves; a bad value is an error; the core is chosen per GPU from the host's topology."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_priority import CHILD  # a session leader with a second thread and a child: all must take the core

from kernelzero.verify.judge import pinning


def _affinities(leader: int) -> list[set[int]]:
    """The allowed CPUs of every thread of the leader and of its children."""
    pids = [leader] + [int(p) for p in Path(f"/proc/{leader}/task/{leader}/children").read_text().split()]
    return [os.sched_getaffinity(int(t)) for pid in pids for t in os.listdir(f"/proc/{pid}/task")]


def _own() -> list[set[int]]:
    return [os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{os.getpid()}/task")]


@pytest.fixture
def leader():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
        yield proc.pid
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_every_thread_of_the_groups_and_the_judge_runs_on_the_core_inside_the_block_and_as_before_after(
    leader, monkeypatch
):
    monkeypatch.setenv(pinning.PIN_ENV, "1")
    allowed = os.sched_getaffinity(0)
    before, own_before = _affinities(leader), _own()
    assert len(before) == 3 and all(a == allowed for a in before)
    core = {max(allowed)}
    with pinning.pinned([leader, None], core) as moved:
        assert moved >= 3 + len(own_before)
        assert all(a == core for a in _affinities(leader)), _affinities(leader)
        assert all(a == core for a in _own())
    assert _affinities(leader) == before
    assert _own() == own_before


def test_unset_or_zero_moves_nothing(leader, monkeypatch):
    for value in (None, "0"):
        if value is None:
            monkeypatch.delenv(pinning.PIN_ENV, raising=False)
        else:
            monkeypatch.setenv(pinning.PIN_ENV, value)
        before = _affinities(leader)
        with pinning.pinned([leader], {max(os.sched_getaffinity(0))}) as moved:
            assert moved == 0
            assert _affinities(leader) == before


def test_a_bad_value_is_an_error(monkeypatch):
    monkeypatch.setenv(pinning.PIN_ENV, "yes")
    with pytest.raises(ValueError, match="KZ_PIN_TIMING must be 0 or 1"):
        with pinning.pinned([]):
            pass


def test_a_group_that_is_gone_moves_only_the_judge(monkeypatch):
    monkeypatch.setenv(pinning.PIN_ENV, "1")
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    with pinning.pinned([proc.pid], {max(os.sched_getaffinity(0))}) as moved:
        assert moved == len(_own())


def test_cpu_lists_and_cores_from_the_topology(tmp_path):
    assert pinning.cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    for cpu, siblings in {0: "0,4", 1: "1,5", 4: "0,4", 5: "1,5", 6: "6"}.items():
        (tmp_path / f"cpu{cpu}/topology").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}/topology/thread_siblings_list").write_text(siblings + "\n")
    # cpu 7 has no topology: a core of its own; cpu 1's sibling 5 is not allowed: left out
    assert pinning.cores({0, 1, 4, 6, 7}, tmp_path) == [{7}, {6}, {0, 4}, {1}]


def test_each_gpu_gets_its_own_core_counted_round(monkeypatch):
    found = pinning.cores(os.sched_getaffinity(0))
    assert pinning.timing_cpus(0) == found[0]
    assert pinning.timing_cpus(len(found)) == found[0]  # more GPUs than cores: round
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert pinning.gpu_index() == 1 and pinning.timing_cpus() == found[1 % len(found)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234")
    assert pinning.gpu_index() == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_honest_kernel_timed_on_one_core_is_correct_and_says_how_many_threads_moved(monkeypatch):
    """The judge and both workers pinned for the timing window (KZ_PIN_TIMING=1): the verdict is the same as
    unpinned, and the window moved the judge's threads and both workers' (each at least its main thread)."""
    from test_standby import _case

    from kernelzero.verify import options_for, verify

    monkeypatch.setenv(pinning.PIN_ENV, "1")
    task, good = _case("correct/triton_gelu.py")
    own_before = _own()
    verdict = verify(task, good, "triton", options_for(device="cuda"))
    assert verdict.status == "correct", (verdict.status, verdict.message, verdict.error_log[-2000:])
    assert verdict.stage_seconds.get("pinned_threads", 0) >= 3, verdict.stage_seconds
    assert _own()[: len(own_before)] == own_before  # the judge's threads run where they ran before

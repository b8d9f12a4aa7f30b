"""Faults of the local pool and the GPU lease, on the CPU: a runner (judge process) killed mid-job,
the lease's health probe after a crash (who may hold the lease when: test_lease.py)."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from procs import cmdline, process_tree

from kernelzero.service.pool import PoolStats, VerifyRequest, verify_many
from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for
from kernelzero.verify.judge.probe import probe_gpu

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _request(tag=0) -> VerifyRequest:
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    good = (KERNELS / "correct" / "triton_gelu.py").read_text()
    return VerifyRequest(resize(task, preset="smoke"), good, "triton", options_for(compile_check=False), tag=tag)


def _judges() -> list[int]:
    """Pids of the verification judges this process started (`kernelzero.verify.judge.launch --parent PID`): its
    children when started cold, the fork server's grandchildren when forked (sandbox/zygote.py)."""
    mine = f"\0--parent\0{os.getpid()}\0"
    return [pid for pid in process_tree() if "kernelzero.verify.judge.launch" in (cmd := cmdline(pid)) and mine in cmd]


def _killer(times: int, seen: set, stop: threading.Event) -> None:
    """Kill the first `times` judges that appear (each once)."""
    killed = 0
    while killed < times and not stop.is_set():
        for pid in _judges():
            if pid not in seen:
                seen.add(pid)
                time.sleep(0.5)  # mid-job: it has started its worker
                try:
                    os.kill(pid, signal.SIGKILL)  # the judge alone (a forked one leads no group of its own)
                except ProcessLookupError:
                    continue
                killed += 1
                break
        time.sleep(0.05)


@pytest.mark.parametrize("kills,status", [(1, "correct"), (2, "infra_error")])
def test_runner_killed_mid_job_is_retried_once_then_infra_error(kills, status, monkeypatch):
    monkeypatch.setenv("KZ_STANDBY", "0")  # cold judges: a standby started ahead (the GPU gate's) is not the job's
    before = set(_judges())
    stop = threading.Event()
    thread = threading.Thread(target=_killer, args=(kills, before, stop), daemon=True)
    thread.start()
    stats = PoolStats()
    try:
        # no standby judge either: on a GPU the pool starts one ahead per lane, and the killer must hit the retry's
        ((_, verdict),) = list(verify_many([_request()], jobs=1, stats=stats, standby=0))
    finally:
        stop.set()
        thread.join(10)
    assert stats.retries == 0  # verify() retried its judge itself (judge/run.py): the pool does not add a third try
    assert verdict.status == status, verdict.message
    if status == "correct":
        assert any("verified again alone" in n for n in verdict.notes), verdict.notes
    else:
        assert verdict.stage == "judge" and "died" in verdict.message


def test_a_crash_makes_the_next_holder_probe_and_a_failed_probe_refuses_the_gpu(tmp_path, monkeypatch):
    import kernelzero.verify.judge.lease as lease

    monkeypatch.setattr(lease, "LOCK_DIR", tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the probe's fresh process sees no GPU, here or on a GPU machine
    with lease.gpu_lease("gpu-y"):
        pass  # no marker: no probe
    assert lease.probe_log == []
    with lease.gpu_lease("gpu-y"):
        lease.mark_suspect("gpu-y")
    with pytest.raises(lease.GpuUnhealthy):  # the probe needs a GPU; its process has none
        with lease.gpu_lease("gpu-y"):
            pass
    assert lease.probe_log and lease.probe_log[-1][0] is False
    assert lease.suspect_path("gpu-y").exists()  # stays suspect until a probe passes


def test_probe_runs_in_a_fresh_process_and_reports_failures():
    ok = probe_gpu(None, device="cpu")
    assert ok.ok and ok.message == ""
    bad = probe_gpu(None, device="no-such-device")
    assert not bad.ok and "exited" in bad.message


def test_thread_safe_sandbox_argv_enters_every_namespace_and_refuses_without_util_linux(monkeypatch):
    import shutil

    import pytest

    from kernelzero.verify.sandbox import box
    from kernelzero.verify.sandbox.process import SandboxPlan, sandbox_argv

    plan = SandboxPlan(1900000007, 1900000007, True, [], boxed=True)
    argv = sandbox_argv(["python3", "-c", "pass"], plan, "/")
    # setpriv kills unshare with its starter; unshare makes the namespaces as root; enter.py drops to the uid
    assert argv[1:4] == ["--pdeathsig", "KILL", "--"] and argv[4].endswith("unshare")
    ns = argv[5 : argv.index("--", 5)]
    assert {"--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--ipc", "--net"} <= set(ns)
    assert argv[argv.index(box.ENTER) + 1].count('"uid": 1900000007') == 1 and argv[-3:] == ["python3", "-c", "pass"]
    unsafe = SandboxPlan(None, None, False, [], boxed=False)
    assert sandbox_argv(["python3"], unsafe, "/") == ["python3"]  # only --unsafe-no-sandbox runs it as it is
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(box.os, "access", lambda path, mode: False)
    with pytest.raises(box.SandboxUnavailable, match="util-linux"):  # never a weaker sandbox
        sandbox_argv(["python3"], plan, "/")


def test_gpu_lanes_go_to_the_least_loaded_healthy_gpu_and_block_when_full():
    from kernelzero.service.pool import LocalPool

    pool = LocalPool(gpus=[0, 1], per_gpu=2, build_jobs=1)
    assert pool.slots == 1 + 2 * 2
    taken = [pool.gpu_slots.take() for _ in range(3)]
    assert sorted(taken) == [0, 0, 1] or sorted(taken) == [0, 1, 1]
    assert pool.gpu_slots.take() in (0, 1)  # the fourth fills both GPUs
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.gpu_slots.take()))
    waiter.start()
    time.sleep(0.3)
    assert got == []  # every lane is full: it waits
    pool.gpu_slots.give(1)
    waiter.join(5)
    assert got == [1]
    pool.stats.unhealthy.update({0, 1})
    assert pool.gpu_slots.take() is None  # no healthy GPU left: the caller reports infra_error at stage runner


def test_verdicts_about_the_runner_are_not_stored(tmp_path):
    from kernelzero.service.store import VerdictStore
    from kernelzero.types import Verdict

    store = VerdictStore(tmp_path / "v.sqlite")
    v = Verdict(
        status="crash",
        task="t",
        task_hash="h",
        candidate_hash="c",
        backend="cuda",
        profile="default",
        device="cpu",
        stage="runner",
    )
    store.put("k", v)
    assert store.get("k") is None


def test_gpu_busy_counts_overlapping_leases_once():
    from kernelzero.service.pool import _covered

    assert _covered([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == pytest.approx(4.0)
    assert _covered([]) == 0.0

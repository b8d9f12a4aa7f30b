"""The GPU lease across processes (verify/judge/lease.py): checks share a GPU, timing takes it alone.

Real processes take real `flock`s on a lock folder of the test's own; no GPU is needed (leases are
named by a made-up GPU uuid).
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import threading
import time

import pytest


def _holder(lock_dir: str, uuid: str, shared: float, excl: float, log: str, ready, release=None) -> None:
    """Hold the lease shared for `shared` s (or until `release` is set), then (if `excl`) exclusively for
    `excl` s; log the spans."""
    import kernelzero.verify.judge.lease as lease

    lease.LOCK_DIR = __import__("pathlib").Path(lock_dir)
    spans = {}
    with lease.gpu_lease(uuid, shared=shared > 0):
        spans["first"] = [time.time()]
        ready.set()
        if release is not None:
            release.wait(60)
        else:
            time.sleep(shared or excl)
        spans["first"].append(time.time())
        if shared and excl:
            with lease.exclusive_gpu(uuid):
                spans["excl"] = [time.time()]
                time.sleep(excl)
                spans["excl"].append(time.time())
    with open(log, "w") as f:
        json.dump(spans, f)


def _start(tmp_path, name: str, shared: float, excl: float = 0.0, release=None):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    log = str(tmp_path / f"{name}.json")
    proc = ctx.Process(target=_holder, args=(str(tmp_path), "gpu-z", shared, excl, log, ready, release))
    proc.start()
    return proc, ready, log


def _turnstile_held(lease, uuid: str) -> bool:
    """Someone holds the turnstile: a timer waiting for the GPU."""
    return locked(lease.turn_path(uuid))


def locked(path) -> bool:
    """Someone holds an exclusive `flock` on the lock file at `path` (made here if missing)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@pytest.fixture
def lease(tmp_path, monkeypatch):
    import kernelzero.verify.judge.lease as lease

    monkeypatch.setattr(lease, "LOCK_DIR", tmp_path)
    return lease


def test_checks_share_the_gpu(tmp_path, lease):
    proc, ready, _ = _start(tmp_path, "a", shared=2.0)
    assert ready.wait(60)
    with lease.gpu_lease("gpu-z", shared=True) as waited:
        assert waited < 1.0
    proc.join(30)


def test_timing_waits_until_no_check_runs(tmp_path, lease):
    release = multiprocessing.get_context("spawn").Event()
    proc, ready, _ = _start(tmp_path, "a", shared=1.0, release=release)
    assert ready.wait(60)
    threading.Timer(1.0, release.set).start()  # the check ends 1 s from now
    with lease.gpu_lease("gpu-z") as waited:
        assert waited > 0.8
    proc.join(30)


def test_a_waiting_timer_blocks_new_checks(tmp_path, lease):
    release = multiprocessing.get_context("spawn").Event()
    checker, ready, _ = _start(tmp_path, "checker", shared=1.0, release=release)
    assert ready.wait(60)
    timer, _, timer_log = _start(tmp_path, "timer", shared=0.0, excl=1.0)
    deadline = time.monotonic() + 60
    while not _turnstile_held(lease, "gpu-z"):  # the timer is now waiting for the checker
        assert time.monotonic() < deadline, "the timer never queued"
        time.sleep(0.05)
    got = []

    def new_check() -> None:
        with lease.gpu_lease("gpu-z", shared=True):
            got.append(time.time())

    check = threading.Thread(target=new_check)
    check.start()
    time.sleep(0.3)
    release.set()  # the first check ends: the timer goes first, then the new check
    check.join(30)
    timer.join(30)
    checker.join(30)
    with open(timer_log) as f:
        timed = json.load(f)["first"]
    assert got and got[0] >= timed[1] - 0.01, "a new check got the GPU before the waiting timer had it"


def test_a_checker_steps_aside_between_steps_for_a_waiting_timer_and_not_otherwise(tmp_path, lease):
    """`let_writers_in` between a checker's steps: with nobody waiting it keeps its hold (0 s); with a timer at the
    turnstile it lets the timer time first and holds the GPU again only after the timer is done."""
    with lease.gpu_lease("gpu-z", shared=True):
        assert lease.let_writers_in("gpu-z") == 0.0
        timer, _, timer_log = _start(tmp_path, "timer", shared=0.0, excl=1.0)
        deadline = time.monotonic() + 60
        while not _turnstile_held(lease, "gpu-z"):  # the timer waits for this checker
            assert time.monotonic() < deadline, "the timer never queued"
            time.sleep(0.05)
        waited = lease.let_writers_in("gpu-z")
        back = time.time()
        assert lease._held["gpu-z"]["mode"] == "shared"
    timer.join(30)
    with open(timer_log) as f:
        timed = json.load(f)["first"]
    assert waited > 0.8 and back >= timed[1] - 0.01, (waited, back, timed)
    assert lease.let_writers_in("gpu-z") == 0.0  # outside a lease: nothing to do


def test_two_checkers_upgrading_to_timing_do_not_deadlock_or_overlap(tmp_path):
    procs = [_start(tmp_path, name, shared=0.5, excl=0.7) for name in ("a", "b")]
    for proc, _, _ in procs:
        proc.join(30)
        assert proc.exitcode == 0
    (a, b) = [json.load(open(log))["excl"] for _, _, log in procs]
    assert a[1] <= b[0] + 0.01 or b[1] <= a[0] + 0.01, (a, b)


def test_leases_are_reentrant_but_never_silently_upgraded(lease):
    with lease.gpu_lease("gpu-w", shared=True):
        with lease.gpu_lease("gpu-w", shared=True) as again:
            assert again == 0.0
        with pytest.raises(RuntimeError, match="exclusive_gpu"):
            with lease.gpu_lease("gpu-w"):
                pass
        with lease.exclusive_gpu("gpu-w"):
            with lease.gpu_lease("gpu-w") as inner:  # the stricter second verification, inside the timing
                assert inner == 0.0


def test_the_bench_reports_every_timed_span_that_meets_another_sample():
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root / "bench"), str(root / "tests" / "verify")]
    from lease_overlaps import overlaps

    apart = [((0.0, 2.0), (1.0, 2.0)), ((0.5, 0.9), None), ((3.0, 4.0), (3.5, 4.0))]
    assert overlaps({"0": apart}) == {"0": 0}
    clash = apart + [((1.5, 1.8), None)]  # a check ran while sample 0 was being timed
    assert overlaps({"0": clash}) == {"0": 1}

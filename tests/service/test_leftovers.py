"""Nothing outlives the server: SIGKILL at random points leaves no process and no folder and loses no job;
verifications leave no temp folder while the server runs.

Each server gets its own TMPDIR (tmp_path/...), so everything it, its judges and their workers create is
counted there; shared-memory transfer folders are counted for the judges seen while it ran.
"""

import random
import signal
import sqlite3
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serving import GELU, NO_KERNEL, free_port, gelu_task, judges_of, leftovers, start, stop  # noqa: E402

from kernelzero.service.client import Client  # noqa: E402


def test_sigkill_at_random_points_leaves_no_process_or_folder_and_loses_no_job(tmp_path):
    db, port, rng = tmp_path / "service.sqlite", free_port(), random.Random(1515)
    client = Client(f"http://127.0.0.1:{port}")
    task = gelu_task()
    ids: list[int] = []
    for round_ in range(2):
        tmpdir = tmp_path / f"tmp{round_}"
        proc = start(db, port, tmpdir, "--jobs", "2")
        # the jobs a killed server held finish first: a job held at two deaths is failed by design (issue 27,
        # test_service_db.py), so each kill here hits a job that no server died holding before
        client.wait(ids, timeout_s=180, poll_s=0.2)
        ids += client.submit([(task, GELU, "triton", {"trials": 1 + round_}), (task, NO_KERNEL, "triton", {})])
        judges: set[int] = set()
        deadline = time.monotonic() + 60
        while not judges:  # a judge has started: kill at a random point of its start-up or its run
            assert time.monotonic() < deadline, "no judge started"
            judges |= judges_of(tmpdir)
            time.sleep(0.02)
        deadline = time.monotonic() + rng.uniform(0.0, 2.5)
        while time.monotonic() < deadline:
            judges |= judges_of(tmpdir)
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = time.monotonic()
        procs, folders = leftovers(tmpdir, judges)
        print(f"round {round_}: judges {sorted(judges)}, clean after {time.monotonic() - killed:.1f} s")
        assert not procs, f"round {round_}: processes outlived the server: {procs}"
        assert not folders, f"round {round_}: folders left: {folders}"
    tmpdir = tmp_path / "tmp-last"
    proc = start(db, port, tmpdir, "--jobs", "2")
    try:
        verdicts = client.wait(ids, timeout_s=180, poll_s=0.2)
    finally:
        stop(proc)
    assert [v.status for v in verdicts] == ["correct", "no_kernel"] * 2
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT state, completions FROM jobs ORDER BY id").fetchall()
    assert rows == [("done", 1)] * len(ids)  # every job finished, each once
    assert leftovers(tmpdir, set()) == ([], [])  # a graceful stop leaves nothing either


def test_verifications_leave_no_temp_folder_while_the_server_runs(tmp_path):
    """Fails until the judge finishes its teardown when the pool thread that started it has ended
    (verify/sandbox `die_with_parent` and verify/judge/launch.py: see the report of issue 15)."""
    port, tmpdir = free_port(), tmp_path / "tmp"
    proc = start(tmp_path / "service.sqlite", port, tmpdir, "--jobs", "2")
    try:
        client = Client(f"http://127.0.0.1:{port}")
        task = gelu_task()
        verdicts = client.verify_batch([(task, GELU, "triton", {"trials": 1})], timeout_s=120)
        assert [v.status for v in verdicts] == ["correct"]
        [root] = list(tmpdir.iterdir())  # the server's own folder, kz-serve-PID
        deadline = time.monotonic() + 15  # judges end after their answer: give their teardown time
        while list(root.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list(root.iterdir()) == []
    finally:
        stop(proc)


CALLER = """
import sys, threading
from kernelzero.service.pool import verify_many, VerifyRequest
from kernelzero.verify import options_for
from kernelzero.tasks import load_suite, resize, select
task = resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")
req = VerifyRequest(task, sys.stdin.read(), "triton", options_for(compile_check=False, device="cpu"))
list(verify_many([req], jobs=1))
"""


def test_a_judge_dies_with_a_caller_killed_at_any_point(tmp_path):
    """No server and no reaper here: the verifier's own guarantee. The caller (verify_many in a plain
    process) is SIGKILLed while its judge starts up, and later while it runs; the judge, its worker and
    their folders must all go. Fails until the judge reads its caller's pid from its command line instead of
    getppid() after start-up, and cleans up on its death signal (report of issue 15)."""
    import os
    import subprocess
    import sys

    from serving import ROOT

    for i, delay in enumerate((0.0, 0.0, 1.5)):  # 0: as soon as the judge process exists (its start-up)
        tmpdir = tmp_path / f"t{i}"
        tmpdir.mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
            "TMPDIR": str(tmpdir),
        }
        caller = subprocess.Popen([sys.executable, "-c", CALLER], stdin=subprocess.PIPE, env=env)
        caller.stdin.write(GELU.encode())
        caller.stdin.close()
        deadline, judges = time.monotonic() + 60, set()
        while not judges:
            assert time.monotonic() < deadline and caller.poll() is None, "no judge started"
            judges = judges_of(tmpdir)
        time.sleep(delay)
        judges |= judges_of(tmpdir)
        caller.kill()
        caller.wait()
        procs, folders = leftovers(tmpdir, judges, wait_s=15, ignore="kz-verify-")  # the killed caller's own
        assert (procs, folders) == ([], []), f"kill {i} ({delay} s after the judge started)"

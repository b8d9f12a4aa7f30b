"""The judge's death signal (verify/sandbox/process.die_with_parent) never leaves a worker or a folder behind.

Each case runs a small judge-like child process: it arms the death signal for its parent (this test's helper
process), builds something, and the helper is killed at a chosen point. The child's own clean-up must remove
every folder and worker it had, whichever instruction the signal interrupted.
"""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kernelzero.verify.sandbox.process import source_root

# The judge-like child: arms the death signal for the pid in argv[1], then runs the scenario in argv[2].
CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from kernelzero.verify.sandbox.box import DEFAULT_UIDS
    from kernelzero.verify.sandbox.process import deferred_death, die_with_parent, plan_sandbox, scratch_folder
    from kernelzero.verify.sandbox.worker_process import kill_all, start_worker

    die_with_parent(int(sys.argv[1]), on_death=kill_all)
    report = Path(os.environ["REPORT"])
    scenario = sys.argv[2]
    if scenario == "deferred":
        with deferred_death():
            report.write_text("blocked\\n")
            time.sleep(1.5)  # the parent dies in here: the signal waits for the block's end
            with open(report, "a") as f:
                f.write("block finished\\n")
        with open(report, "a") as f:
            f.write("after the block\\n")  # never reached: the signal ends the process at the block's end
    elif scenario == "worker":
        with scratch_folder("kz-cand-") as shared:
            started = start_worker("", shared, interpret=True, sandbox=plan_sandbox(DEFAULT_UIDS, False), host_mem_gb=4)
            report.write_text(f"{started.worker.proc.pid} {started.worker.xfer}\\n")
            time.sleep(60)  # the parent dies while the worker runs: no `finally` of ours closes it
    """
)

# The parent: starts the child, then waits to be killed.
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(__import__("os").getpid()), sys.argv[2]])
    print(child.pid, flush=True)
    time.sleep(120)
    """
)


def _start(tmp_path: Path, scenario: str) -> tuple[subprocess.Popen, int, Path]:
    report = tmp_path / "report.txt"
    env = {**os.environ, "PYTHONPATH": str(source_root()), "TMPDIR": str(tmp_path), "REPORT": str(report)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD, scenario], stdout=subprocess.PIPE, env=env, text=True
    )
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 60
    while not report.exists():
        assert time.monotonic() < deadline, "the child never reported"
        time.sleep(0.05)
    return parent, child, report


def _gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
            if state == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.1)
    return False


def test_the_signal_waits_for_a_deferred_block_and_ends_the_process_after_it(tmp_path):
    parent, child, report = _start(tmp_path, "deferred")
    parent.kill()
    parent.wait()
    assert _gone(child)
    assert report.read_text().splitlines() == ["blocked", "block finished"]


def test_the_signal_kills_every_worker_and_removes_its_folders_before_unwinding(tmp_path):
    parent, child, report = _start(tmp_path, "worker")
    deadline = time.monotonic() + 60
    while len(report.read_text().split()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    worker_pid, xfer = report.read_text().split()
    assert Path(xfer).is_dir()
    parent.kill()
    parent.wait()
    assert _gone(child) and _gone(int(worker_pid))
    assert not Path(xfer).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]  # kz-cand-* removed too

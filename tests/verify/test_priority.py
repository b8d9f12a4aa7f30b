"""CPU priority for the holder of the GPU alone (verify/judge/priority.py): every thread of every process of the given
process groups runs at HOLD_NICE inside the block and at its old value after; a group that is gone changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelzero.verify.judge import priority

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a negative nice value needs root (CAP_SYS_NICE)")

# a session leader with a second thread and a child: all three must take the group's value
CHILD = """
import os, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if os.fork() == 0:
    time.sleep(60)
    os._exit(0)
print("ready", flush=True)
time.sleep(60)
"""


def _nices(leader: int) -> list[int]:
    """The nice value of every thread of the leader and of its children."""
    pids = [leader] + [int(p) for p in Path(f"/proc/{leader}/task/{leader}/children").read_text().split()]
    values = []
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            values.append(int(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[16]))
    return values


def test_every_thread_of_the_groups_runs_first_inside_the_block_and_as_before_after():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
        assert len(_nices(proc.pid)) == 3 and set(_nices(proc.pid)) == {0}
        with priority.first(priority.groups_of(proc.pid)) as applied:
            assert applied
            assert set(_nices(proc.pid)) == {priority.HOLD_NICE}, _nices(proc.pid)
            assert os.getpriority(os.PRIO_PGRP, os.getpgid(0)) == priority.HOLD_NICE  # the judge's own group too
        assert set(_nices(proc.pid)) == {0}
        assert os.getpriority(os.PRIO_PROCESS, 0) == 0
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_a_group_that_is_gone_changes_nothing():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    assert priority.groups_of(proc.pid) == [os.getpgid(0)]  # only the caller's own
    with priority.first([proc.pid]) as applied:
        assert not applied

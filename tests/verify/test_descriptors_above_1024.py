"""The verifier reads its children's pipes on descriptors above 1023 (issue 27: `select()` failed there).

A server with about 1,100 open connections gave its judges' pipes descriptors above FD_SETSIZE (1024), and every
verification failed with `ValueError: filedescriptor out of range in select()`. Each reader that waits on a child's
pipe (the judge's output, the task checker's grandchild, the profiler's child) is called here with its pipe above
1024: the test first raises RLIMIT_NOFILE and fills the lower descriptors.
"""

import os
import resource
import subprocess
import sys
import time

import pytest

from kernelzero.verify import profile
from kernelzero.verify.judge import run

LOW = 1100  # descriptors held open, so new ones land above 1024


@pytest.fixture
def high_fds():
    """Hold descriptors 0..LOW open (duplicates of /dev/null), so the next one opened is above 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = LOW + 200
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    held = []
    try:
        while True:
            fd = os.open(os.devnull, os.O_RDONLY)
            held.append(fd)
            if fd >= LOW:
                break
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _child(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout.fileno() > 1024
    return proc


def test_judge_output_on_a_descriptor_above_1024(high_fds, tmp_path):
    proc = _child("print('judged')")
    got = run._judge_output(proc, 30.0, tmp_path / "lease-marker", tmp_path / "result.json")
    assert got == (b"judged\n", False)  # the output's end: a judge's last answer
    proc.wait()


def test_profile_reply_on_a_descriptor_above_1024(high_fds):
    proc = _child(f"print('noise'); print('{profile.PREFIX} ready 1')")
    assert profile._expect(proc, "ready", time.monotonic() + 30) == "ready 1"
    proc.stdout.close()
    proc.wait()


def test_task_check_result_on_a_descriptor_above_1024(high_fds):
    from kernelzero.tasks import _child as task_child  # imports torch: only here

    rfd, wfd = os.pipe()
    assert rfd > 1024
    os.write(wfd, b'{"ok": true}')
    os.close(wfd)
    try:
        assert task_child._read_all(rfd, time.monotonic() + 30) == b'{"ok": true}'
    finally:
        os.close(rfd)

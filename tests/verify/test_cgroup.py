"""The memory cgroup around a sandboxed process tree (verify/sandbox/cgroup.py): where this machine gives a memory
controller to root, a burst over the limit is stopped by the kernel at once, a forked child counts, the leaf goes
with its tree and leaves of dead judges are swept; where it gives none, `create` says so (None) and nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelzero.verify.sandbox import cgroup
from kernelzero.verify.sandbox.cgroup import MemoryCgroup

LIMIT = 64 << 20


def _cgroup_or_skip() -> MemoryCgroup:
    made = MemoryCgroup.create(LIMIT)
    if made is None:
        pytest.skip("no memory cgroup this process may use (needs root and a writable memory controller)")
    return made


def _run(made: MemoryCgroup, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(made.wrap([sys.executable, "-c", code]), capture_output=True, text=True, timeout=60)


def test_a_burst_over_the_limit_is_stopped_by_the_kernel_and_the_leaf_goes_with_its_tree():
    made = _cgroup_or_skip()
    try:
        assert not made.oom_killed()
        done = _run(made, "b = bytearray(256 * 2**20); print('survived')")
        assert done.returncode == -9 and "survived" not in done.stdout, (done.returncode, done.stdout, done.stderr)
        assert made.oom_killed()
    finally:
        made.remove()
    assert not made.path.exists()


def test_a_forked_child_counts_against_the_same_limit_and_a_small_tree_runs():
    made = _cgroup_or_skip()
    try:
        forked = (
            "import os\npid = os.fork()\nif pid == 0:\n    b = bytearray(256 * 2**20)\n    os._exit(0)\n"
            "print(os.waitpid(pid, 0)[1])"
        )
        done = _run(made, forked)
        assert done.returncode == 0 and done.stdout.strip() == "9", (done.stdout, done.stderr)  # the child: SIGKILL
        assert made.oom_killed()
    finally:
        made.remove()
    small = _cgroup_or_skip()
    try:
        done = _run(small, "b = bytearray(8 * 2**20); print('fine')")
        assert done.returncode == 0 and done.stdout.strip() == "fine" and not small.oom_killed()
    finally:
        small.remove()


def test_leaves_of_judges_that_died_are_swept():
    made = _cgroup_or_skip()
    made.remove()
    dead = next(pid for pid in range(4_000_000, 4_100_000) if not Path(f"/proc/{pid}").exists())
    stale = made.path.parent / f"j{dead}-0000"
    stale.mkdir()
    fresh = _cgroup_or_skip()
    try:
        assert not stale.exists() and fresh.path.exists()
    finally:
        fresh.remove()
        if stale.exists():
            stale.rmdir()


def test_without_a_memory_controller_there_is_no_cgroup(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cgroup, "MOUNTS", (tmp_path / "memory", tmp_path / "unified"))
    assert MemoryCgroup.create(LIMIT) is None
    if os.geteuid() != 0:
        return
    # a hierarchy without the limit file (not a memory controller) is not used either
    monkeypatch.setattr(cgroup, "_own_path", lambda version: "")
    (tmp_path / "memory").mkdir()
    assert MemoryCgroup.create(LIMIT) is None and not (tmp_path / "memory" / cgroup.FOLDER).exists()


def test_a_tree_that_cannot_join_still_starts(tmp_path: Path):
    """A cgroup whose `cgroup.procs` cannot be written (here: a plain folder) starts the command all the same."""
    fake = MemoryCgroup(tmp_path / "missing", 1, LIMIT)
    done = subprocess.run(fake.wrap([sys.executable, "-c", "print('ran')"]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ran", done.stderr
    assert not fake.oom_killed()

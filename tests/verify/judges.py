"""The judge processes a test started, for fault tests that kill them or wait for the next one (by /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def judge_pids() -> set[int]:
    """Pids of the live judge processes (`kernelzero.verify.judge.launch --parent PID`) this process started."""
    me, found = str(os.getpid()).encode(), set()
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kernelzero.verify.judge.launch" in cmd and me in cmd:
            found.add(int(pid))
    return found


PRIVATE_ROOTS = ("/tmp", "/dev/shm", "/var/tmp")  # the sandbox mounts a fresh tmpfs over each (verify/sandbox/box.py)


def shared_folder_root() -> Path:
    """Where a test may make a folder that sandboxed processes see too: this tests folder, unless the checkout lives
    under a folder the sandbox makes private (a clone in /tmp: CI), then the home folder (setup.sh lets the
    sandbox uids traverse it)."""
    here = Path(__file__).resolve().parent
    if any(str(here) == root or str(here).startswith(root + "/") for root in PRIVATE_ROOTS):
        return Path.home()
    return here

"""Who holds and who waits for the verifier's GPU locks, for the GPU gate's monitor (scripts/gpu_tests.sh).

    python3 scripts/gate_locks.py [LOCK_DIR] [--stacks]

Reads /proc/locks for the files in LOCK_DIR (default /tmp/kernelzero-gpu-locks: the GPU lease's `.lock` and `.turn`,
verify/judge/lease.py) and prints one line per holder or waiter: the file, HOLD or WAIT, the mode, the pid, its
state, age and role, and the test that started it (PYTEST_CURRENT_TEST from its environment, or its parent's).
With --stacks, a holder's Python stack follows (py-spy, when it is on PATH). A run that jams says who jams it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def _inodes(folder: Path) -> dict[int, str]:
    found = {}
    for path in folder.glob("*"):
        if path.is_file():
            found[path.stat().st_ino] = path.name[-12:]
    return found


def lock_lines(inodes: dict[int, str]) -> list[tuple[str, str, str, int]]:
    """(file, HOLD/WAIT, READ/WRITE, pid) for every /proc/locks entry on one of `inodes`."""
    rows = []
    for line in Path("/proc/locks").read_text().splitlines():
        parts = line.split()
        waiting = "->" in parts
        if waiting:
            parts.remove("->")
        if len(parts) < 6:
            continue
        mode, pid, where = parts[3], parts[4], parts[5]
        try:
            inode = int(where.split(":")[-1])
        except ValueError:
            continue
        if inode in inodes:
            rows.append((inodes[inode], "WAIT" if waiting else "HOLD", mode, int(pid)))
    return rows


def _read(path: str) -> str:
    try:
        return Path(path).read_bytes().decode(errors="replace")
    except OSError:
        return ""


def describe(pid: int) -> str:
    """State, age in seconds, role and test of `pid`."""
    stat = _read(f"/proc/{pid}/stat").rsplit(")", 1)[-1].split()
    if not stat:
        return "gone"
    ticks = os.sysconf("SC_CLK_TCK")
    uptime = float(_read("/proc/uptime").split()[0])
    age = uptime - int(stat[19]) / ticks
    args = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
    role = "judge" if "judge.launch" in args else "probe" if "probe_child" in args else args[:50].replace("\n", " ")
    test = ""
    for who in (pid, int(stat[1])):
        for item in _read(f"/proc/{who}/environ").split("\0"):
            if item.startswith("PYTEST_CURRENT_TEST="):
                test = item.split("=", 1)[1]
                break
        if test:
            break
    return f"{stat[0]} {age:.0f}s {role} [{test}]"


def main(argv: list[str]) -> int:
    folder = Path(next((a for a in argv if not a.startswith("--")), "/tmp/kernelzero-gpu-locks"))
    if not folder.is_dir():
        return 0
    rows = lock_lines(_inodes(folder))
    for name, kind, mode, pid in rows:
        print(f"lock {name} {kind} {mode} {pid} {describe(pid)}")
    spy = shutil.which("py-spy")
    if "--stacks" in argv and spy:
        for pid in sorted({pid for _, kind, _, pid in rows if kind == "HOLD"}):
            try:
                done = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=10)
                print(f"stack of {pid}:\n{(done.stdout or done.stderr)[-3000:]}")
            except (OSError, subprocess.TimeoutExpired) as exc:
                print(f"stack of {pid}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

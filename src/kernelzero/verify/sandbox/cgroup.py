"""A memory cgroup around one sandboxed process tree, where the machine gives one: the kernel enforces the sample's
memory limit at the moment of allocation, for every process of the tree (forked children and daemons included).

Why: the judge's watchdog (worker_process.py, `WorkerProcess.receive`) reads the resident memory of the sample's
PID namespace every 50 ms; an allocation faster than that goes past the limit until the next reading, and on a
machine that other samples share, that can be the host's memory. Where this module finds a memory controller it
may use, the kernel stops the tree at `limit` instead (SIGKILL from the cgroup's out-of-memory killer), and the
judge reports `oom` (`oom_killed`). Where it finds none (not root, a read-only or absent hierarchy, cgroup v2
without the memory controller delegated), `create` returns None and the watchdog alone holds the limit, as before.

Layout. The cgroup is made inside this process's own memory cgroup (`/proc/self/cgroup`), never at the hierarchy's
root: a container's own limit keeps counting the samples' memory. v1: `<mount>/<own>/kernelzero/<leaf>`, with
`memory.limit_in_bytes` and the `oom_kill` count of `memory.oom_control`; v2: `<mount>/<own>/kernelzero/<leaf>`
with `memory.max` and `memory.events`, where the memory controller can be enabled for `kernelzero` (a v2 cgroup
with processes of its own cannot give controllers to its children, so the folder holds no process itself).

Joining. `wrap(argv)` starts the tree through `/bin/sh`, which writes its own pid into the cgroup and then execs
`argv`: every process the sandbox then starts is inside from its first instruction (no window between a start and
a move); if that write fails, the tree starts outside the cgroup, under the watchdog alone. A leaf is removed with its tree (`remove`); leaves of judges that died are removed by the next `create`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path

MOUNTS = (Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup"))  # v1's memory hierarchy, then v2's unified one
FOLDER = "kernelzero"


def _own_path(version: int) -> str | None:
    """This process's cgroup path in the memory hierarchy (v1) or the unified one (v2), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == 1 and "memory" in controllers.split(",")) or (version == 2 and controllers == ""):
            return path.lstrip("/")
    return None


def _parent(mount: Path, version: int) -> Path | None:
    """The `kernelzero` folder inside this process's own cgroup, made if needed; None where it cannot be used."""
    if os.geteuid() != 0 or shutil.which("sh") is None:
        return None
    own = _own_path(version)
    if own is None:
        return None
    base = mount / own
    if version == 1 and not (base / "memory.limit_in_bytes").exists():
        return None
    if version == 2:
        try:
            if "memory" not in (base / "cgroup.controllers").read_text().split():
                return None
        except OSError:
            return None
    parent = base / FOLDER
    try:
        parent.mkdir(exist_ok=True)
        if version == 2 and "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            (base / "cgroup.subtree_control").write_text("+memory")
            (parent / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        return None
    return parent


def _sweep(parent: Path) -> None:
    """Remove leaves left by judges that died (`j<pid>-...` whose pid is gone); a leaf still holding a process stays."""
    for leaf in parent.glob("j*-*"):
        pid = leaf.name[1:].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            try:
                leaf.rmdir()
            except OSError:
                pass


class MemoryCgroup:
    """One leaf cgroup with a memory limit (see the module docstring)."""

    def __init__(self, path: Path, version: int, limit: int):
        self.path, self.version, self.limit = path, version, limit

    @classmethod
    def create(cls, limit: int) -> MemoryCgroup | None:
        """A fresh leaf limited to `limit` bytes, or None where this machine gives no usable memory controller."""
        for version, mount in ((1, MOUNTS[0]), (2, MOUNTS[1])):
            if version == 2 and not (mount / "cgroup.controllers").exists():
                continue
            parent = _parent(mount, version)
            if parent is None:
                continue
            _sweep(parent)
            leaf = parent / f"j{os.getpid()}-{secrets.token_hex(4)}"
            try:
                leaf.mkdir()
                name = "memory.limit_in_bytes" if version == 1 else "memory.max"
                (leaf / name).write_text(str(int(limit)))
            except OSError:
                try:
                    leaf.rmdir()
                except OSError:
                    pass
                continue
            return cls(leaf, version, int(limit))
        return None

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside this cgroup (through /bin/sh, which joins it and execs `argv`). Where joining fails
        the tree starts all the same, outside it: the watchdog's limit still holds, as on a machine without one."""
        return ["sh", "-c", 'echo $$ 2>/dev/null > "$0"; exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this cgroup for going over its limit."""
        name, key = ("memory.oom_control", "oom_kill") if self.version == 1 else ("memory.events", "oom_kill")
        try:
            for line in (self.path / name).read_text().splitlines():
                field, _, value = line.partition(" ")
                if field == key and value.strip().isdigit():
                    return int(value) > 0
        except OSError:
            return False
        return False

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the leaf once its processes are gone (they are being killed: wait up to `wait_s`)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # a later `create` sweeps it once this judge is gone
                time.sleep(0.05)

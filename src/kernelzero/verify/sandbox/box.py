"""One OS sandbox per role: an unprivileged uid of its own and fresh PID, mount and network namespaces.

Every process that runs code the verifier does not trust (the candidate's worker, the task's reference process,
compile checks, the CUDA capture, the profiler, `kernelzero tasks check`) starts through `command()`:

    setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child --mount --propagation private --mount-proc --ipc [--net]
        -- PYTHON -I -S sandbox/enter.py SPEC -- ARGV...

util-linux's `setpriv` and `unshare` only (present on nearly every Linux image; bubblewrap is not needed). What
each role gets, and why:

- **its own uid** (`UidLease`): one uid per started process, from a range (default 1900000000 + 8192, no passwd
  entry needed), held through an `flock` on `/tmp/kernelzero-sandbox-uids/<uid>.lock` for as long as the process
  may live, so concurrent judges in any process never share one. The candidate cannot signal, trace or read the
  files of the reference (another uid), and nothing else either;
- **its own PID namespace**: it sees only its own processes (/proc is remounted), cannot signal or ptrace any
  other; ARGV is the namespace's process 1, so when it ends (or `unshare` is killed: `--kill-child`, and the
  death signal `enter.py` arms again after the change of uid) the kernel kills every process left in it,
  setsid daemons and double forks included; `setpriv --pdeathsig` kills `unshare` when its starter dies;
- **its own mount namespace**: fresh tmpfs over /tmp, /dev/shm and /var/tmp, with only its own folders (and the
  interpreter and kernelzero, when they live there) bound back: no other sample's or role's files are visible,
  so no link, rewrite or hard link can reach them;
- **no network**: an empty network namespace (`--net`);
- **its own IPC namespace** (`--ipc`): System V shared memory, semaphores and message queues it creates are
  neither seen by another sample nor left behind (they would outlive every process otherwise);
- **memory**: every process of the namespace counts against the role's limit (`namespace_rss`, read by the
  worker's watchdog every 50 ms); where the machine gives root a memory controller, the tree also runs in a memory
  cgroup a quarter and 1 GiB over that limit (cgroup.py), so a burst between two readings is stopped by the kernel;
  elsewhere (many containers give none) the limit is sampled only.

`check()` runs the whole chain once per process (cached): a probe child that must reach the interpreter as a
sandbox uid, in the namespaces. When it fails, `SandboxUnavailable` says why and how to fix it; verification then
refuses to start (never runs anything less isolated) unless the caller asked for `unsafe_no_sandbox`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from kernelzero.verify.sandbox import safe_fs

ENTER = str(Path(__file__).with_name("enter.py"))
PRIVATE = ("/tmp", "/dev/shm", "/var/tmp")  # a fresh tmpfs over each (those that exist)
LOCK_DIR = Path("/tmp/kernelzero-sandbox-uids")
DEFAULT_UIDS = "1900000000:8192"  # first uid : how many (VerifyOptions.sandbox_uids)
SETUP_FAILED = 125  # enter.py's exit status when it could not set the sandbox up


def source_root() -> Path:
    """The folder that holds the `kernelzero` package: children put it on PYTHONPATH to import it."""
    return Path(__file__).resolve().parents[3]


def import_path() -> str:
    """PYTHONPATH for a sandboxed child: kernelzero's folder, then this process's own entries (a judge started for
    a backend that lives outside kernelzero has that backend's folder there, see judge/run.py)."""
    entries = [str(source_root()), *(e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e)]
    return os.pathsep.join(dict.fromkeys(entries))


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be set up on this machine as configured: nothing may run (the message says how to fix it,
    or to pass --unsafe-no-sandbox for trusted local use)."""


def parse_uids(spec: str) -> tuple[int, int]:
    """`"FIRST:COUNT"` -> (first, count); ValueError naming the field otherwise."""
    try:
        first, count = (int(part) for part in spec.split(":"))
    except ValueError:
        raise ValueError(f"sandbox_uids: {spec!r} is not FIRST:COUNT") from None
    if first < 1000 or count < 1 or first + count > 2**32 - 2:
        raise ValueError(f"sandbox_uids: {spec!r} out of range (FIRST >= 1000, FIRST + COUNT < 2**32 - 1)")
    return first, count


class UidLease:
    """A uid of the range held by this process (an exclusive flock) until `release`; the kernel drops the lock when
    the holder dies, so a killed judge never strands one."""

    def __init__(self, spec: str = DEFAULT_UIDS):
        first, count = parse_uids(spec)
        safe_fs.shared_folder(LOCK_DIR, 0o700)
        start = (os.getpid() * 7919 + threading.get_ident()) % count  # spread the search: fewer collisions
        for k in range(count):
            uid = first + (start + k) % count
            fd = safe_fs.open_lock(LOCK_DIR / f"{uid}.lock", 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            self.uid, self.fd = uid, fd
            return
        raise SandboxUnavailable(f"all {count} sandbox uids of {spec} are in use")

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


@dataclass(frozen=True)
class Role:
    """Who one sandboxed process is: its uid (and gid, the same number) and whether it keeps the network."""

    uid: int
    network: bool  # False: an empty network namespace


def _needed(paths: list[str]) -> list[str]:
    """The real folders among `paths` that lie under a privatised mount, without those inside another one kept."""
    hidden = [p for p in PRIVATE if os.path.isdir(p)]
    found: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p}, key=len):
        if not os.path.isdir(path) or not any(path == h or path.startswith(h + "/") for h in hidden):
            continue
        if path in hidden or any(path == k or path.startswith(k + "/") for k in found):
            continue
        found.append(path)
    return found


def _runtime_paths() -> list[str]:
    """Folders every sandboxed Python needs: the interpreter's installation and kernelzero's import path."""
    exe = os.path.realpath(sys.executable)
    return [
        sys.prefix,
        sys.base_prefix,
        str(Path(exe).parent.parent),
        *import_path().split(os.pathsep),
        os.environ.get("KZ_BUILD_CACHE", ""),
        os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"),  # a GPU shared through MPS: its pipes stay
    ]


def tools() -> tuple[str, str]:
    """The absolute paths of util-linux's `setpriv` and `unshare`; SandboxUnavailable when one is missing."""
    found = [
        shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else "")
        for name in ("setpriv", "unshare")
    ]
    missing = [name for name, path in zip(("setpriv", "unshare"), found) if not path]
    if missing:
        raise SandboxUnavailable(
            f"the sandbox needs util-linux's {' and '.join(missing)} (not found on PATH): install util-linux, "
            "or pass --unsafe-no-sandbox for trusted local use"
        )
    return found[0], found[1]


def enter_spec(role: Role, cwd: str | os.PathLike, keep: list[str] = ()) -> dict:
    """What `enter.py` does for `role` working in `cwd` with `keep` (command(); the fork server, zygote.py)."""
    return {
        "keep": _needed([str(cwd), *keep, *_runtime_paths()]),
        "private": [p for p in PRIVATE if os.path.isdir(p)],
        "cwd": os.path.realpath(cwd),
        "uid": role.uid,
        "gid": role.uid,
    }


def command(argv: list[str], role: Role, cwd: str | os.PathLike, keep: list[str] = ()) -> list[str]:
    """`argv` wrapped to start in `role`'s sandbox (see the module docstring), working in `cwd`; `keep`: the
    folders it may use besides `cwd` (its transfer folder), bound into its private /tmp or /dev/shm."""
    setpriv, unshare = tools()
    spec = enter_spec(role, cwd, keep)
    ns = ["--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", "--mount-proc", "--ipc"]
    if not role.network:
        ns.append("--net")
    return [
        setpriv,
        "--pdeathsig",
        "KILL",
        "--",
        unshare,
        *ns,
        "--",
        sys.executable,
        "-I",
        "-S",
        ENTER,
        json.dumps(spec),
        *argv,
    ]


_checked: dict[tuple[str, bool], str] = {}
_check_lock = threading.Lock()


def check(uids: str, network: bool) -> None:
    """Raise SandboxUnavailable unless a sandbox of this configuration starts here (checked once per process): run as
    root, util-linux present, the namespaces allowed, and a sandbox uid able to run this interpreter and import
    kernelzero's sandbox package."""
    key = (uids, network)
    with _check_lock:
        if key not in _checked:
            _checked[key] = _why_not(uids, network)
    if _checked[key]:
        raise SandboxUnavailable(_checked[key])


def assume_checked(uids: str, network: bool) -> None:
    """Record that this configuration was checked by the process that started this one (a judge started by
    `verify()` or the pool, which checked before starting it): no second probe."""
    with _check_lock:
        _checked[(uids, network)] = ""


def _why_not(uids: str, network: bool) -> str:
    if os.geteuid() != 0:
        return (
            "the sandbox needs root (it gives each role its own uid and namespaces): run the verifier as root, "
            "or pass --unsafe-no-sandbox for trusted local use"
        )
    try:
        parse_uids(uids)
        tools()
        lease = UidLease(uids)
    except (SandboxUnavailable, ValueError, OSError) as exc:
        return str(exc)
    try:
        probe = "import kernelzero.verify.sandbox.channel, os; assert os.getuid() == int(os.sys.argv[1])"
        argv = command([sys.executable, "-I", "-c", _probe_code(probe), str(lease.uid)], Role(lease.uid, network), "/")
        try:
            done = subprocess.run(
                argv, capture_output=True, timeout=120, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the sandbox could not be started: {exc}"
        if done.returncode == 0:
            return ""
        err = done.stderr.decode(errors="replace").strip()[-600:]
        return (
            f"a sandbox uid cannot run {sys.executable} and import kernelzero (exit {done.returncode}: {err}). "
            "Every folder on the way to the interpreter, its installation and kernelzero must be executable and "
            "readable by other users (a venv under /root is not): `bash scripts/setup.sh` makes the project's own "
            "venv so; or pass --unsafe-no-sandbox for trusted local use"
        )
    finally:
        lease.release()


def _probe_code(body: str) -> str:
    return f"import sys; sys.path[:0] = {import_path().split(os.pathsep)!r}; {body}"


def namespace_of(outer_pid: int) -> str | None:
    """The PID namespace (its /proc link text) whose `unshare` is `outer_pid`: its process 1 is `unshare`'s child;
    None before that child exists, or once it is gone."""
    own = os.readlink("/proc/self/ns/pid")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
            if parent == outer_pid:
                ns = os.readlink(f"/proc/{entry}/ns/pid")
                return ns if ns != own else None
        except (OSError, IndexError, ValueError):
            continue
    return None


def pids_in(ns: str) -> list[int]:
    """The pids (as this process sees them) of every process in the PID namespace `ns` (namespace_of)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def rss_of(pids: list[int]) -> int:
    """The resident bytes of `pids` together (processes gone meanwhile count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total

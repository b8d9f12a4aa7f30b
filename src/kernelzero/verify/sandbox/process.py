"""Start and watch the candidate's process.

What the sandbox gives each candidate:
- a fresh Python interpreter (`python -m kernelzero.verify.worker`), its own session and process
  group (killed as a whole at the end), no core dumps, killed if the judge dies;
- its own folder, laid out by root before it is handed over and never touched again (`lay_out_workdir`,
  `safe_fs.py`: no link the sandbox plants there is followed);
- a scrubbed environment: PATH, LANG, CUDA_VISIBLE_DEVICES and the variables the verifier sets
  (HOME, TMPDIR, TORCH_EXTENSIONS_DIR and TRITON_CACHE_DIR inside its own temp dir, so no cache is
  shared between samples), nothing else from the caller;
- when the verifier runs as root: its own empty network namespace, then a drop to an unprivileged
  user (default `nobody`) that cannot read the judge's memory or files (the judge is also marked
  non-dumpable). Where that user cannot run the Python interpreter (e.g. a venv under /root), or
  namespaces are not allowed, the candidate runs as the caller's user and the verdict says so;
- a resident-memory watchdog (RLIMIT_AS would break CUDA start-up, which maps far more address
  space than it uses): past the limit the process group is killed and the sample gets `oom`;
- deadlines on every reply: past one, the process group is killed and the sample gets `timeout`.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelzero.verify.sandbox import safe_fs

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
KEEP_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "KZ_BUILD_CACHE",
    "TORCH_CUDA_ARCH_LIST",
    "CC",
    "CXX",
    "CUDAHOSTCXX",
)  # the compilers: the worker
# must build (and key builds, cuda_build.toolchain) with the same ones as the pool's builders


@dataclass
class SandboxPlan:
    """What isolation this machine allows, decided once per judge process."""

    uid: int | None  # drop to this uid (None: stay)
    gid: int | None
    netns: bool  # unshare the network namespace
    notes: list[str] = field(default_factory=list)  # what could not be done, for the verdict


def source_root() -> Path:
    """The folder that holds the `kernelzero` package: children put it on PYTHONPATH to import it."""
    return Path(__file__).resolve().parents[3]


def import_path() -> str:
    """PYTHONPATH for a sandboxed child: kernelzero's folder, then this process's own entries (a judge started for
    a backend that lives outside kernelzero has that backend's folder there, see judge/run.py)."""
    entries = [str(source_root()), *(e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e)]
    return os.pathsep.join(dict.fromkeys(entries))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def make_non_dumpable() -> None:
    """Keep other users (and same-user ptrace) out of this process's memory and /proc files."""
    _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


_DEATH: dict = {"depth": 0, "pending": None, "on_death": None}  # the death signal's state in this process


def die_with_parent(parent: int, on_death: Callable[[], None] | None = None) -> None:
    """The judge: end when the process that started it dies (a killed pool, server, Ray actor or eval), so no
    judge (and, through its own death signal, no worker) outlives its caller.

    `parent` is the caller's pid, passed on the command line: getppid() read here would already name init (or a
    subreaper) when the caller died while this interpreter started. The signal is SIGTERM. Its handler first
    ignores any further SIGTERM (the teardown is never cut short), runs `on_death` (the launcher kills every
    worker this process started and removes their transfer folders: worker_process.kill_all, so no `with` block
    that unwinds next removes a folder a live worker still writes into), then raises SystemExit, so the judge's
    `with` and `finally` blocks remove its folders. Code that creates something and registers it for that
    clean-up does so under `deferred_death()`, so the signal never lands between the two.
    """
    _DEATH["on_death"] = on_death
    signal.signal(signal.SIGTERM, _on_death_signal)
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the caller died before the signal was armed
        os._exit(1)


def _on_death_signal(signum: int, _frame) -> None:
    if _DEATH["depth"]:  # inside deferred_death: the block's end delivers it
        _DEATH["pending"] = signum
        return
    _die(signum)


def _die(signum: int) -> None:
    signal.signal(signum, signal.SIG_IGN)
    if _DEATH["on_death"] is not None:
        try:
            _DEATH["on_death"]()
        except Exception:  # noqa: BLE001 - the exit below must happen whatever the clean-up met
            pass
    raise SystemExit(128 + signum)


@contextmanager
def deferred_death() -> Iterator[None]:
    """Hold the death signal back for the block: the judge ends when the block is left, not inside it. For steps
    that create a resource and register it for clean-up (a worker, a folder): the signal cannot land between the
    two. A flag, not a signal mask: the kernel may hand the signal to any thread, and Python runs its handler in
    the main thread whichever received it (so only the main thread's blocks count; elsewhere this does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _DEATH["depth"] += 1
    try:
        yield
    finally:
        _DEATH["depth"] -= 1
        if not _DEATH["depth"] and _DEATH["pending"] is not None:
            _die(_DEATH["pending"])


@contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder (in TMPDIR) removed when the block is left, on the death signal too: unlike
    tempfile.TemporaryDirectory it is created under `deferred_death`, so no signal lands between its creation
    and the clean-up's registration."""
    path = None
    try:
        with deferred_death():
            path = tempfile.mkdtemp(prefix=prefix)
        yield Path(path)
    finally:
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def outlive_parent() -> None:
    """Disarm the death signal once the judge's answer is written, so its teardown (bounded: close the worker,
    remove the folders) runs to the end. The signal follows the *thread* that started the judge: a pool thread
    that ends right after the answer would otherwise kill the judge mid-teardown and leave its kz-cand-* folder."""
    _libc().prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)


def _probe(fn) -> bool:
    """Run `fn` in a forked child; True if it returned without raising."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _unshare_net() -> None:
    if _libc().unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")


_plans: dict[tuple[str, bool], SandboxPlan] = {}
_plans_lock = threading.Lock()


def plan_sandbox(user: str, isolate_network: bool) -> SandboxPlan:
    """Decide how far this machine lets us isolate a candidate (decided once per process).

    The decision forks probe children, which is unsafe while other threads run (a child can inherit a
    lock held by another thread and hang): multi-threaded callers (the pool) call this once first,
    before they start threads; later calls return the same plan without forking.
    """
    key = (user, isolate_network)
    with _plans_lock:
        if key not in _plans:
            _plans[key] = _plan_sandbox(user, isolate_network)
        return _plans[key]


def thread_safe_argv(argv: list[str], plan: SandboxPlan) -> tuple[list[str], dict[str, Any]]:
    """(argv, Popen keyword arguments) applying `plan` without a Python preexec function.

    For processes started from threads. With a network namespace, util-linux's `unshare --net`
    (run as root) creates it and then drops to the plan's user itself (`--setuid/--setgid`, which
    also clears supplementary groups); without one, Popen's own (C) `user`/`group` arguments drop.
    If `unshare` is missing, the plan's network namespace is not applied.
    """
    tool = shutil.which("unshare")
    if plan.netns and tool:
        ids = ["--setgid", str(plan.gid), "--setuid", str(plan.uid)] if plan.uid is not None else []
        return [tool, "--net", *ids, "--", *argv], {}
    if plan.uid is not None:
        return argv, {"user": plan.uid, "group": plan.gid, "extra_groups": []}
    return argv, {}


def _plan_sandbox(user: str, isolate_network: bool) -> SandboxPlan:
    notes: list[str] = []
    uid = gid = None
    root = os.geteuid() == 0
    if root and user:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            notes.append(f"no user {user!r}: the candidate ran as root")
        else:

            def can_run() -> None:
                os.setgroups([])
                os.setgid(entry.pw_gid)
                os.setuid(entry.pw_uid)
                if not os.access(sys.executable, os.X_OK) or not os.access(Path(__file__).parent, os.R_OK):
                    raise PermissionError

            if _probe(can_run):
                uid, gid = entry.pw_uid, entry.pw_gid
            else:
                notes.append(f"user {user!r} cannot run {sys.executable}: the candidate ran as root")
    elif not root:
        notes.append("not root: the candidate ran as the verifier's own user")
    netns = isolate_network and root and _probe(_unshare_net)
    if isolate_network and not netns:
        notes.append("no network namespace allowed here: the candidate had network access")
    return SandboxPlan(uid, gid, netns, notes)


def apply_limits(plan: SandboxPlan) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if plan.netns:
        _unshare_net()
    if plan.uid is not None:
        os.setgroups([])
        os.setgid(plan.gid)
        os.setuid(plan.uid)


WORKDIR_SUBS = ("home", "tmp", "torch_extensions", "triton_cache")


def prepare_workdir(workdir: Path, plan: SandboxPlan, files: dict[str, str] | None = None) -> dict[str, str]:
    """Lay out the candidate's folder (see `lay_out_workdir`) and return its environment."""
    env, fd = lay_out_workdir(workdir, plan, files)
    os.close(fd)
    return env


def lay_out_workdir(
    workdir: Path, plan: SandboxPlan, files: dict[str, str] | None = None
) -> tuple[dict[str, str], int]:
    """Create the candidate's folders and `files` (name -> text) in `workdir`, all owned by its user; return its
    environment and a descriptor of `workdir` opened before it was handed over (for later writes: safe_fs).

    `workdir` is created here, or is a fresh folder of this process's user (a scratch folder): one the sandbox
    user owns or may write is refused (`safe_fs.UnsafePath`), so root never creates, writes or chowns through a
    link the sandbox planted. Everything inside is made relative to the folder's descriptor while only this
    user can write it; the folder itself is handed to the sandbox user last.
    """
    Path(workdir).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(workdir, 0o700)
    except FileExistsError:
        pass
    fd = safe_fs.open_folder(workdir)
    try:
        owner = (plan.uid, plan.gid) if plan.uid is not None else None
        for sub in WORKDIR_SUBS:
            safe_fs.make_folder(fd, sub, owner)
        for name, text in (files or {}).items():
            safe_fs.write_new(fd, name, text.encode(), 0o644, owner)
        if owner is not None:
            os.fchown(fd, *owner)
    except BaseException:
        os.close(fd)
        raise
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update(
        {
            "HOME": str(workdir / "home"),
            "TMPDIR": str(workdir / "tmp"),
            "TORCH_EXTENSIONS_DIR": str(workdir / "torch_extensions"),
            "TRITON_CACHE_DIR": str(workdir / "triton_cache"),
            "PYTHONPATH": import_path(),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "MAX_JOBS": str(max(1, min(8, os.cpu_count() or 1))),
        }
    )
    return env, fd


def popen_sandboxed(
    argv: list[str], workdir: Path, plan: SandboxPlan, env: dict[str, str], **popen_kw: Any
) -> subprocess.Popen:
    """Start `argv` in `workdir` with the sandbox's process limits (a new session, no core dumps, killed
    with its parent, the plan's network namespace and user); `env` comes from `prepare_workdir`.

    For generated code other than a candidate worker (a proposed task module, say): the caller owns the
    process, its deadline and its kill (`os.killpg(proc.pid, SIGKILL)`). Not for use from threads other
    than the main one (the limits are applied by a Python preexec function; see `thread_safe_argv`).
    """
    return subprocess.Popen(
        argv, cwd=workdir, env=env, start_new_session=True, preexec_fn=lambda: apply_limits(plan), **popen_kw
    )


def physical_gpu(index: int) -> str:
    """The CUDA_VISIBLE_DEVICES entry of this process's visible GPU `index` (to pin a child to it)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() == "":
        return str(index)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise ValueError(f"gpu_index {index} asked for, but CUDA_VISIBLE_DEVICES={visible!r} shows {len(entries)}")
    return entries[index]


def gpu_visible() -> bool:
    """A cheap guess, without importing torch, whether a CUDA GPU is visible to this process."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")

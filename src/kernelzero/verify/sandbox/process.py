"""Start and watch the candidate's process.

What the sandbox gives each candidate:
- a fresh Python interpreter (`python -m kernelzero.verify.worker`), its own session and process
  group (killed as a whole at the end), no core dumps, killed if the judge dies;
- its own folder, laid out by root before it is handed over and never touched again (`lay_out_workdir`,
  `safe_fs.py`: no link the sandbox plants there is followed);
- a scrubbed environment: PATH, LANG, CUDA_VISIBLE_DEVICES and the variables the verifier sets
  (HOME, TMPDIR, TORCH_EXTENSIONS_DIR and TRITON_CACHE_DIR inside its own temp dir, so no cache is
  shared between samples; with KZ_TRITON_SEED=1 the cache starts as a copy of trusted entries, triton_seed.py),
  nothing else from the caller;
- its own OS sandbox (`box.py`): a uid of its own (one per started process, from a range), its own PID, mount
  (private /tmp, /dev/shm, /var/tmp) and empty network namespaces; when its process 1 ends, every process it
  started dies. The judge is non-dumpable. Where the sandbox cannot be set up (not root, util-linux missing,
  namespaces refused, a sandbox uid unable to run the interpreter: a venv under /root), `plan_sandbox` raises
  `box.SandboxUnavailable` and nothing runs; only `unsafe_no_sandbox` (--unsafe-no-sandbox) runs without it,
  and every verdict then says so (`UNSAFE_NOTE`);
- a resident-memory watchdog summed over the namespace's processes (RLIMIT_AS would break CUDA start-up,
  which maps far more address space than it uses): past the limit the sample is killed and gets `oom`;
- deadlines on every reply: past one, the process group is killed and the sample gets `timeout`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelzero.verify.sandbox import box, safe_fs, triton_seed
from kernelzero.verify.sandbox.box import import_path, source_root  # noqa: F401 - kept importable from here

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


UNSAFE_NOTE = (
    "UNSAFE (--unsafe-no-sandbox): the candidate and the task's code ran without the sandbox (no uid of their own, "
    "no PID, mount or network namespace), as the verifier's own user"
)


@dataclass
class SandboxPlan:
    """How a sandboxed process starts: decided once per judge process (`plan_sandbox`), then one per started process
    with a uid of its own (`role_plan`, released with `release_role`)."""

    uid: int | None  # this role's uid (None: the machine-level plan, or the unsafe mode)
    gid: int | None
    netns: bool  # an empty network namespace
    notes: list[str] = field(default_factory=list)  # what the verdict must say (the unsafe mode)
    boxed: bool = False  # started through box.command (uid, PID, mount and network namespaces); False: unsafe mode
    uids: str = box.DEFAULT_UIDS  # the uid range roles are drawn from
    lease: box.UidLease | None = None  # holds `uid` for this role until released


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


_plans: dict[tuple[str, bool, bool], SandboxPlan] = {}
_plans_lock = threading.Lock()


def plan_sandbox(uids: str, isolate_network: bool, unsafe: bool = False) -> SandboxPlan:
    """The sandbox of this process's roles; raises `box.SandboxUnavailable` when it cannot be set up here as
    configured (nothing may run then), unless `unsafe` (--unsafe-no-sandbox: no sandbox at all, and every verdict
    says so). Checked once per process (a probe child through the whole chain, box.check)."""
    key = (uids, isolate_network, unsafe)
    with _plans_lock:
        if key not in _plans:
            if unsafe:
                _plans[key] = SandboxPlan(None, None, False, [UNSAFE_NOTE], boxed=False, uids=uids)
            else:
                box.check(uids, isolate_network)
                _plans[key] = SandboxPlan(None, None, isolate_network, [], boxed=True, uids=uids)
        return _plans[key]


def plan_for(opts) -> SandboxPlan:
    """`plan_sandbox` for a `VerifyOptions`."""
    return plan_sandbox(opts.sandbox_uids, opts.isolate_network, opts.unsafe_no_sandbox)


def role_plan(plan: SandboxPlan) -> SandboxPlan:
    """A plan for one started process: a uid of its own from the range (held until `release_role`)."""
    if not plan.boxed:
        return replace(plan, notes=list(plan.notes))
    lease = box.UidLease(plan.uids)
    return replace(plan, uid=lease.uid, gid=lease.uid, lease=lease, notes=list(plan.notes))


def release_role(plan: SandboxPlan) -> None:
    """Give the role's uid back (once its processes are gone)."""
    if plan.lease is not None:
        plan.lease.release()


def sandbox_argv(argv: list[str], plan: SandboxPlan, cwd: str | os.PathLike, keep: list[str] = ()) -> list[str]:
    """`argv` started in the role's sandbox (box.command), or as it is in the unsafe mode; thread-safe (no
    preexec function: Popen's own `start_new_session` is the only other thing a caller needs)."""
    if not plan.boxed:
        return list(argv)
    return box.command(argv, box.Role(plan.uid, not plan.netns), cwd, list(keep))


def unsafe_limits() -> None:
    """The unsafe mode's preexec function: no core dumps, killed with its parent (nothing else)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
        if triton_seed.enabled():  # Triton's driver helpers and warm-up kernel, copied in (KZ_TRITON_SEED)
            cache = os.open("triton_cache", os.O_RDONLY | os.O_DIRECTORY | safe_fs.OPEN_FLAGS, dir_fd=fd)
            try:
                triton_seed.seed(cache, owner)
            finally:
                os.close(cache)
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
    if plan.uid is not None:  # a sandbox uid has no passwd entry: getpass and the like read these first
        env.update({"USER": f"kz{plan.uid}", "LOGNAME": f"kz{plan.uid}"})
    return env, fd


def popen_sandboxed(
    argv: list[str], workdir: Path, plan: SandboxPlan, env: dict[str, str], **popen_kw: Any
) -> subprocess.Popen:
    """Start `argv` in `workdir` in the role `plan`'s sandbox (box.py: its uid, PID, mount and network
    namespaces, no core dumps, killed with its starter) in a new session; `env` comes from `prepare_workdir`.

    For generated code other than a candidate worker (a proposed task module, a profile): the caller owns the
    process, its deadline and its kill (`os.killpg(proc.pid, SIGKILL)`: the namespace dies with it).
    """
    preexec = None if plan.boxed else unsafe_limits
    return subprocess.Popen(
        sandbox_argv(argv, plan, workdir), cwd=workdir, env=env, start_new_session=True, preexec_fn=preexec, **popen_kw
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


@contextmanager
def released(plan: SandboxPlan) -> Iterator[SandboxPlan]:
    """`plan` (a role's), its uid given back when the block is left (its processes must be gone by then)."""
    try:
        yield plan
    finally:
        release_role(plan)


def task_launcher(unsafe: bool = False) -> Callable[[str], Any]:
    """The launcher of `kernelzero.tasks.check.CheckOptions`: each call starts `python -m kernelzero.tasks._child` on
    a request in a sandbox of its own (a uid taken for it, PID, mount and network namespaces), its folder laid out
    with the request and an empty results file that is opened here before the child starts (so nothing it plants
    there is read). The sandbox is checked now: `box.SandboxUnavailable` before any task runs, unless `unsafe`."""
    plan = plan_sandbox(box.DEFAULT_UIDS, True, unsafe)

    @contextmanager
    def launch(request: str) -> Iterator[tuple[subprocess.Popen, Any]]:
        with tempfile.TemporaryDirectory(prefix="kz-check-") as tmp, released(role_plan(plan)) as role:
            os.chmod(tmp, 0o711)  # root's own fresh folder: the sandbox's uid passes through to its folder
            folder = Path(tmp, "box")
            env, fd = lay_out_workdir(folder, role, {"request.json": request, "results.jsonl": ""})
            try:
                results = os.fdopen(safe_fs.open_regular("results.jsonl", dir_fd=fd))
            finally:
                os.close(fd)
            argv = [
                *(sys.executable, "-m", "kernelzero.tasks._child"),
                *(str(folder / "request.json"), str(folder / "results.jsonl")),
            ]
            with results:
                proc = subprocess.Popen(
                    sandbox_argv(argv, role, folder),
                    cwd=folder,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    env=env,
                    preexec_fn=None if role.boxed else unsafe_limits,
                )
                try:
                    yield proc, results
                finally:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    return launch


def transfer_folder(plan: SandboxPlan) -> Path:
    """A fresh folder for large tensors (channel.py): `in/` written by the judge, `out/` by the worker.

    In /dev/shm (memory) when it is there, else the temp folder; `out/` belongs to the worker's user.
    """
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    for stale in Path(base).glob("kz-xfer-*-*"):  # left by a judge that was killed: it holds memory
        pid = stale.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix=f"kz-xfer-{os.getpid()}-", dir=base))
    root.chmod(0o711)
    (root / "in").mkdir(mode=0o755)
    (root / "in").chmod(0o755)
    (root / "out").mkdir(mode=0o700)
    if plan.uid is not None:
        os.chown(root / "out", plan.uid, plan.gid)
    return root

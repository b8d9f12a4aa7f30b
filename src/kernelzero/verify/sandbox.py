"""Start and watch the candidate's process.

What the sandbox gives each candidate:
- a fresh Python interpreter (`python -m kernelzero.verify.worker`), its own session and process
  group (killed as a whole at the end), no core dumps, killed if the judge dies;
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
import queue
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelzero.verify.channel import ChannelError, FileSink, recv_msg, send_obj

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


class WorkerDied(Exception):
    """The worker exited, was killed or broke the channel; `status` and `message` say how."""

    def __init__(self, status: str, message: str, exit_signal: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.status, self.exit_signal, self.exit_code = status, exit_signal, exit_code


@dataclass
class SandboxPlan:
    """What isolation this machine allows, decided once per judge process."""

    uid: int | None  # drop to this uid (None: stay)
    gid: int | None
    netns: bool  # unshare the network namespace
    notes: list[str] = field(default_factory=list)  # what could not be done, for the verdict


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def make_non_dumpable() -> None:
    """Keep other users (and same-user ptrace) out of this process's memory and /proc files."""
    _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def die_with_parent() -> None:
    """The judge: be killed when the process that started it dies (a killed pool, Ray actor or eval),
    so no judge (and, through its own death signal, no worker) outlives its caller."""
    parent = os.getppid()
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


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


def _preexec(plan: SandboxPlan) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if plan.netns:
        _unshare_net()
    if plan.uid is not None:
        os.setgroups([])
        os.setgid(plan.gid)
        os.setuid(plan.uid)


def prepare_workdir(workdir: Path, plan: SandboxPlan) -> dict[str, str]:
    """Create the candidate's folders (owned by its user) and return its environment."""
    for sub in ("", "home", "tmp", "torch_extensions", "triton_cache"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
        if plan.uid is not None:
            os.chown(workdir / sub, plan.uid, plan.gid)
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update(
        {
            "HOME": str(workdir / "home"),
            "TMPDIR": str(workdir / "tmp"),
            "TORCH_EXTENSIONS_DIR": str(workdir / "torch_extensions"),
            "TRITON_CACHE_DIR": str(workdir / "triton_cache"),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "MAX_JOBS": str(max(1, min(8, os.cpu_count() or 1))),
        }
    )
    return env


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
        argv, cwd=workdir, env=env, start_new_session=True, preexec_fn=lambda: _preexec(plan), **popen_kw
    )


class WorkerProcess:
    """A running candidate worker: send commands, receive replies under deadlines and a memory cap."""

    def __init__(self, workdir: Path, env: dict[str, str], plan: SandboxPlan, mem_limit_bytes: int):
        self.xfer = _transfer_folder(plan)
        env = {**env, "KZ_XFER_OUT": str(self.xfer / "out")}
        self.sink = FileSink(self.xfer / "in")
        self.ipc = False  # GPU tensors both ways through CUDA IPC (after `check_ipc`)
        self.spent_arena = None  # an arena from a failed IPC check, freed with the worker
        rfd, wfd = os.pipe()
        self.log_path = workdir / "worker.log"
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelzero.verify.worker", str(wfd)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            pass_fds=(wfd,),
            start_new_session=True,
            preexec_fn=lambda: _preexec(plan),
        )
        log.close()
        os.close(wfd)
        self.mem_limit = mem_limit_bytes
        self.replies: queue.Queue = queue.Queue()
        self.peak_rss = 0
        threading.Thread(target=self._reader, args=(rfd,), daemon=True).start()

    def _reader(self, fd: int) -> None:
        try:
            while True:
                self.replies.put(recv_msg(fd, file_dir=self.xfer / "out"))
        except (ChannelError, OSError) as exc:
            self.replies.put(exc)
        finally:
            os.close(fd)

    def send(self, obj: dict[str, Any]) -> None:
        try:
            send_obj(self.proc.stdin.fileno(), {**obj, "ipc_out": self.ipc}, self.sink)
        except (BrokenPipeError, OSError):
            raise self._death("the candidate's process closed its input") from None

    def _rss(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def receive(self, timeout_s: float, what: str) -> tuple[dict[str, Any], list]:
        """The next reply; raise WorkerDied on timeout, memory limit, exit or a broken channel."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                item = self.replies.get(timeout=0.05)
            except queue.Empty:
                rss = self._rss()
                self.peak_rss = max(self.peak_rss, rss)
                if rss > self.mem_limit:
                    self.kill()
                    raise WorkerDied(
                        "oom", f"host memory over the limit ({rss / 2**30:.1f} GiB) during {what}"
                    ) from None
                if time.monotonic() > deadline:
                    self.kill()
                    raise WorkerDied("timeout", f"no result from {what} within {timeout_s:.0f} s") from None
                continue
            if isinstance(item, Exception):
                raise self._death(f"the candidate's process ended during {what} without a result")
            return self._fetch_gpu(item, what)

    def _fetch_gpu(self, item: tuple[dict[str, Any], list], what: str) -> tuple[dict[str, Any], list]:
        """Copy tensors the worker lent through CUDA IPC into the judge's memory (this thread has the context)."""
        header, tensors = item
        if not self.ipc:
            return item
        from kernelzero.verify.cuda_ipc import IpcError, IpcRef, fetch

        refs = [i for i, t in enumerate(tensors) if isinstance(t, IpcRef)]
        if not refs:
            return item

        try:
            own = fetch([tensors[i] for i in refs])
        except IpcError as exc:
            self.kill()
            raise WorkerDied(
                "crash", f"unusable GPU memory handle from the candidate's process during {what}: {exc}"
            ) from None
        tensors = list(tensors)
        for i, t in zip(refs, own):
            tensors[i] = t
        return header, tensors

    def check_ipc(self, timeout_s: float = 60.0) -> str:
        """Turn CUDA IPC on when a probe goes both ways intact; "" when on, else why it stays off.

        Runs before the candidate is imported, so a failure here is the machine's, never the candidate's.
        """
        import torch

        from kernelzero.verify.cuda_ipc import Arena, IpcError

        try:
            self.sink.arena = Arena()
            probe = torch.randint(0, 256, (1 << 16,), dtype=torch.uint8, device="cuda")
            self.ipc = True  # the worker answers through IPC, and the reply is fetched that way
            self.send({"cmd": "ipc_check", "probe": probe})
            reply, tensors = self.receive(timeout_s, "the CUDA IPC check")
            if not reply.get("ok"):
                raise IpcError(reply.get("message", "the worker could not open the judge's memory"))
            if len(tensors) != 1 or not torch.equal(tensors[0], probe):
                raise IpcError("the probe came back changed")
            return ""
        except (IpcError, OSError, WorkerDied, RuntimeError) as exc:
            self.ipc_off()
            return f"{type(exc).__name__}: {exc}"

    def ipc_off(self) -> None:  # GPU tensors through host memory from now on; the arena is freed with the worker
        self.ipc, self.spent_arena, self.sink.arena = False, self.sink.arena, None

    def _death(self, message: str) -> WorkerDied:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        self.kill()
        if code < 0:
            name = signal.Signals(-code).name
            return WorkerDied("crash", f"{message}: killed by {name}", exit_signal=name)
        return WorkerDied("crash", f"{message} (exit code {code})", exit_code=code)

    def log_tail(self, limit: int = 2000) -> str:
        try:
            data = self.log_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode(errors="replace")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        try:
            self.send({"cmd": "exit"})
            self.proc.wait(timeout=5)
        except (WorkerDied, subprocess.TimeoutExpired, OSError):
            pass
        self.kill()
        shutil.rmtree(self.xfer, ignore_errors=True)
        for arena in (self.sink.arena, self.spent_arena):  # the worker is gone: nothing maps them any more
            if arena is not None:
                arena.free()
        self.sink.arena = self.spent_arena = None


def _transfer_folder(plan: SandboxPlan) -> Path:
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


@dataclass
class StartedWorker:
    """A worker started for one candidate, with the files and plan it was started with."""

    worker: WorkerProcess
    plan: SandboxPlan
    cand_path: Path  # the candidate's source, in the worker's own folder
    interpret: bool  # started with TRITON_INTERPRET=1 (a Triton candidate without a GPU)
    ipc_why: str | None = None  # the CUDA IPC check's answer when a standby launcher already ran it


def gpu_visible() -> bool:
    """A cheap guess, without importing torch, whether a CUDA GPU is visible to this process."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def start_worker(
    source: str, shared: Path, *, interpret: bool, user: str, isolate_network: bool, host_mem_gb: float
) -> StartedWorker:
    """Plan the sandbox, lay out the candidate's folder and start its worker process."""
    plan = plan_sandbox(user, isolate_network)
    env = prepare_workdir(shared, plan)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    cand_path = shared / "candidate.py"
    cand_path.write_text(source)
    if plan.uid is not None:
        os.chown(cand_path, plan.uid, plan.gid)
    worker = WorkerProcess(shared, env, plan, int(host_mem_gb * 2**30))
    return StartedWorker(worker, plan, cand_path, interpret)

"""The candidate's worker process as the judge sees it: start it in the sandbox (`start_worker`), send commands,
receive replies under deadlines and a resident-memory cap (`WorkerProcess`), and the exception that says how it
died (`WorkerDied`). The sandbox's rules themselves are in `process.py`.

The worker's output (stdout and stderr: the candidate's prints, tracebacks) comes back through a pipe a thread of
the judge drains, keeping the last `LOG_KEEP` bytes (`log_tail`): no log file in a folder the sandbox can write,
where a link or FIFO in its place would make root read another file (/etc/shadow into the verdict) or block.

Replies are authenticated (channel.py, "Authentication"): the first command that imports untrusted code (`import`,
or `load` without one) carries a fresh key (`KEYED_COMMANDS`), and every reply after it must carry the worker's
tag; one that does not is `WorkerDied("tampered")`: the report was rewritten between the worker and the judge.
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelzero.verify.sandbox import box, safe_fs, zygote_client
from kernelzero.verify.sandbox.cgroup import MemoryCgroup
from kernelzero.verify.sandbox.channel import IPC_KINDS, ChannelError, FileSink, recv_msg, send_obj
from kernelzero.verify.sandbox.channel_auth import Authenticator, ForgedReply
from kernelzero.verify.sandbox.process import (
    SandboxPlan,
    deferred_death,
    lay_out_workdir,
    release_role,
    role_plan,
    sandbox_argv,
    transfer_folder,
    unsafe_limits,
)

NS_SCAN_S = 0.5  # the watchdog finds the sample's processes anew this often (their memory is read every poll)


KEYED_COMMANDS = ("import", "load")  # the commands that import untrusted code first: the key travels with one
LOG_KEEP = 64 * 1024  # bytes of the worker's output kept (its end), for the verdict's error_log
_LIVE: set[WorkerProcess] = set()  # the workers this process started and has not closed (kill_all)


class WorkerDied(Exception):
    """The worker exited, was killed or broke the channel; `status` and `message` say how."""

    def __init__(self, status: str, message: str, exit_signal: str = "", exit_code: int | None = None):
        super().__init__(message)
        self.status, self.exit_signal, self.exit_code = status, exit_signal, exit_code


class WorkerProcess:
    """A running candidate worker: send commands, receive replies under deadlines and a memory cap."""

    def __init__(
        self,
        workdir: Path,
        env: dict[str, str],
        plan: SandboxPlan,
        mem_limit_bytes: int,
        role: str = "candidate",
        folder_fd: int | None = None,
    ):
        self.closed = False
        self.mem_limit = mem_limit_bytes
        self.cgroup: MemoryCgroup | None = None  # the kernel's hold on the limit, where it gives one (cgroup.py)
        self.folder_fd = folder_fd  # `workdir`, opened before it was handed over (closed with the worker)
        with deferred_death():  # the death signal never finds a worker or folder that kill_all does not know
            self.xfer = transfer_folder(plan)
            try:
                self._start(workdir, env, plan, role)
            except BaseException:
                shutil.rmtree(self.xfer, ignore_errors=True)
                raise
            _LIVE.add(self)
        self.replies: queue.Queue = queue.Queue()
        self.peak_rss = 0
        self.last_cmd = ""  # the last command sent, and the GPU high-water mark each command's reply reported
        self.gpu_peaks: dict[str, int] = {}  # (a diagnosis of the memory lease: channel._gpu_peak)
        self.ipc_s: dict[str, float] = {}  # its seconds in CUDA IPC work by kind, as its last reply said
        self.mapped: dict = {}  # its export handles this judge holds open (cuda_ipc.fetch), closed in close()
        self.cpu_s = 0.0  # the process's CPU seconds (itself and its reaped children) as its last reply said
        self.cpu_by_cmd: dict[str, float] = {}  # those seconds by the command whose reply said them ("start")
        self.gpu_trace: list[tuple] = []  # each reply's GPU memory, for KZ_GPU_TRACE (judge.Judge._gpu_peaks)
        threading.Thread(target=self._reader, args=(self.rfd,), daemon=True).start()

    def _start(self, workdir: Path, env: dict[str, str], plan: SandboxPlan, role: str) -> None:
        env = {**env, "KZ_XFER_OUT": str(self.xfer / "out")}
        self.sink = FileSink(self.xfer / "in")
        self.auth = Authenticator()  # armed with the first KEYED_COMMANDS command
        self.ipc = False  # GPU tensors both ways through CUDA IPC (after `check_ipc`)
        self.probing = False  # inside `check_ipc`: a handle the judge cannot open is no fault of the worker
        self.spent_arena = None  # an arena from a failed IPC check, freed with the worker
        self.rfd, wfd = os.pipe()
        self.log = bytearray()
        self.plan, self.ns = plan, None  # the role's plan (its uid is released on close); its PID namespace
        self.ns_pids: list[int] = []  # the namespace's processes at the last scan (`_rss`)
        self.ns_scan_at = 0.0
        tail = ["reference"] if role == "reference" else []
        command = sandbox_argv(
            [sys.executable, "-m", "kernelzero.verify.worker", str(wfd), *tail], plan, workdir, [str(self.xfer)]
        )
        self.proc = None
        if plan.boxed:  # the kernel stops a burst the watchdog's 50 ms readings miss: a quarter and 1 GiB over
            self.cgroup = MemoryCgroup.create(self.mem_limit + self.mem_limit // 4 + (1 << 30))
            spec = box.enter_spec(box.Role(plan.uid, not plan.netns), workdir, [str(self.xfer)])
            procs = str(self.cgroup.path / "cgroup.procs") if self.cgroup else None
            self.proc = zygote_client.start(tail, env, spec, plan.netns, procs, wfd)  # None: start it cold
            command = self.cgroup.wrap(command) if self.cgroup else command
        if self.proc is None:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=env,
                pass_fds=(wfd,),
                start_new_session=True,
                preexec_fn=None if plan.boxed else unsafe_limits,
            )
        os.close(wfd)
        self.forked = isinstance(self.proc, zygote_client.ZygoteProcess)
        self.log_reader = threading.Thread(target=self._drain_log, args=(self.proc.stdout,), daemon=True)
        self.log_reader.start()

    def _drain_log(self, out) -> None:
        """Read the worker's output to its end (all its processes gone), keeping the last LOG_KEEP bytes."""
        try:
            while chunk := os.read(out.fileno(), 1 << 16):
                self.log += chunk
                if len(self.log) > 2 * LOG_KEEP:
                    del self.log[:-LOG_KEEP]
        except OSError:
            pass
        finally:
            out.close()

    def _reader(self, fd: int) -> None:
        try:
            while True:
                self.replies.put(recv_msg(fd, file_dir=self.xfer / "out", auth=self.auth))
        except (ChannelError, OSError) as exc:
            self.replies.put(exc)
        finally:
            os.close(fd)

    def send(self, obj: dict[str, Any]) -> None:
        self.last_cmd = str(obj.get("cmd", "?"))
        obj = {**obj, "ipc_out": self.ipc}
        if self.auth.key is None and obj["cmd"] in KEYED_COMMANDS:  # before any untrusted code runs in the worker
            key = secrets.token_bytes(32)
            self.auth.arm(key)
            obj["auth_key"] = key
        try:
            send_obj(self.proc.stdin.fileno(), obj, self.sink)
        except (BrokenPipeError, OSError):
            raise self._death("the candidate's process closed its input") from None

    def _rss(self) -> int:
        """Resident bytes of the sample: every process of its PID namespace (a forked child's memory counts too),
        or in the unsafe mode the worker's own."""
        if not self.plan.boxed:
            return box.rss_of([self.proc.pid])
        now = time.monotonic()
        if now >= self.ns_scan_at:  # finding the namespace's processes walks /proc: twice a second is enough
            self.ns_scan_at = now + NS_SCAN_S
            if self.ns is None:
                self.ns = box.namespace_of(self.proc.pid)
            self.ns_pids = box.pids_in(self.ns) if self.ns else []
        return box.rss_of(self.ns_pids)

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
            if isinstance(item, ForgedReply):
                self.kill()
                raise WorkerDied(
                    "tampered", f"a reply of the candidate's process during {what} was rewritten in transit ({item})"
                )
            if isinstance(item, Exception):
                raise self._death(f"the candidate's process ended during {what} without a result")
            self._note(item[0])
            return self._fetch_gpu(item, what)

    def _note(self, header: Any) -> None:
        """Pop a reply's diagnosis (GPU memory now and at its peak, CPU and IPC seconds) into this record. The
        candidate's process writes these: numbers of the expected types or nothing, and nothing is decided by them."""
        if not isinstance(header, dict):
            return
        now, cpu, ipc, peak = (header.pop(k, None) for k in ("_gpu_now", "_cpu_s", "_ipc_s", "_gpu_peak"))
        if isinstance(now, list) and len(now) == 3 and all(type(x) is int for x in now) and len(self.gpu_trace) < 200:
            self.gpu_trace.append((self.last_cmd, *now))  # (command, allocated, reserved, export) bytes
        if type(cpu) in (int, float) and cpu > self.cpu_s:
            cmd = self.last_cmd or "start"
            self.cpu_by_cmd[cmd] = round(self.cpu_by_cmd.get(cmd, 0.0) + cpu - self.cpu_s, 3)
            self.cpu_s = float(cpu)
        if isinstance(ipc, dict):
            self.ipc_s = {k: float(v) for k, v in ipc.items() if k in IPC_KINDS and type(v) in (int, float)}
        if type(peak) is int and peak > self.gpu_peaks.get(self.last_cmd, -1):
            self.gpu_peaks[self.last_cmd] = peak

    def _fetch_gpu(self, item: tuple[dict[str, Any], list], what: str) -> tuple[dict[str, Any], list]:
        """Copy tensors the worker lent through CUDA IPC into the judge's memory (this thread has the context)."""
        header, tensors = item
        if not self.ipc:
            return item
        from kernelzero.verify.sandbox.cuda_ipc import IpcError, IpcRef, fetch

        refs = [i for i, t in enumerate(tensors) if isinstance(t, IpcRef)]
        if not refs:
            return item

        try:
            own = fetch([tensors[i] for i in refs], self.mapped)
        except IpcError as exc:
            if self.probing:  # the IPC check's own probe: IPC goes off, the worker (no candidate code yet) stays
                raise
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

        Runs before the candidate is imported, so a failure here is the machine's, never the candidate's: a probe the
        judge cannot open (a driver that refuses IPC across PID namespaces, say) turns IPC off and keeps the worker.
        """
        import torch

        from kernelzero.verify.sandbox.cuda_ipc import Arena, IpcError

        try:
            self.sink.arena = Arena()
            probe = torch.randint(0, 256, (1 << 16,), dtype=torch.uint8, device="cuda")
            self.ipc = self.probing = True  # the worker answers through IPC, and the reply is fetched that way
            self.send({"cmd": "ipc_check", "probe": probe})
            try:
                reply, tensors = self.receive(timeout_s, "the CUDA IPC check")
            finally:
                self.probing = False
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
        if self.cgroup is not None and self.cgroup.oom_killed():
            limit = self.cgroup.limit / 2**30
            return WorkerDied("oom", f"{message}: host memory over the limit ({limit:.1f} GiB, held by the kernel)")
        if code < 0:
            name = signal.Signals(-code).name
            return WorkerDied("crash", f"{message}: killed by {name}", exit_signal=name)
        return WorkerDied("crash", f"{message} (exit code {code})", exit_code=code)

    def log_tail(self, limit: int = 2000, wait_s: float = 2.0) -> str:
        """The end of the worker's output; once it has exited, first waits (up to `wait_s`) for the pipe's end, so
        its last words are in (a process it left behind may hold the pipe open: then what came so far)."""
        if self.proc.poll() is not None:
            self.log_reader.join(wait_s)
        return bytes(self.log[-limit:]).decode(errors="replace")

    def kill(self) -> None:
        if isinstance(self.proc, zygote_client.ZygoteProcess):
            self.proc.kill_group()
        else:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self, graceful: bool = True) -> None:
        """End the worker (asked to exit first when `graceful`, else killed at once) and remove its folders.
        Safe to repeat, also when a first call was cut short (kill_all on the death signal runs it again)."""
        if self.closed:
            return
        if graceful:
            try:
                self.send({"cmd": "exit"})
                self.proc.wait(timeout=5)
            except (WorkerDied, subprocess.TimeoutExpired, OSError):
                pass
        self.kill()
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.xfer, ignore_errors=True)
        if self.folder_fd is not None:
            os.close(self.folder_fd)
            self.folder_fd = None
        if self.mapped:  # the worker is gone: its memory is unmapped here, and the arenas it mapped are freed
            sys.modules["kernelzero.verify.sandbox.cuda_ipc"].close_mapped(self.mapped)  # imported by _fetch_gpu
        arenas = (self.sink.arena, self.spent_arena)
        self.sink.arena = self.spent_arena = None
        for arena in arenas:
            if arena is not None:
                arena.free()
        release_role(self.plan)  # its processes are gone: the uid may serve another role
        self.closed = True
        _LIVE.discard(self)


def kill_all() -> None:
    """Kill every worker this process started and has not closed, and remove their transfer folders: the judge's
    death-signal handler (sandbox/process.die_with_parent) runs this before anything unwinds."""
    for worker in list(_LIVE):
        worker.close(graceful=False)


@dataclass
class StartedWorker:
    """A worker started for one candidate, with the files and plan it was started with."""

    worker: WorkerProcess
    plan: SandboxPlan
    cand_path: Path  # the candidate's source, in the worker's own folder
    interpret: bool  # started with TRITON_INTERPRET=1 (a Triton candidate without a GPU)
    ipc_why: str | None = None  # the CUDA IPC check's answer when a standby launcher already ran it


def start_worker(
    source: str,
    shared: Path,
    *,
    interpret: bool,
    sandbox: SandboxPlan,
    host_mem_gb: float,
    role: str = "candidate",
) -> StartedWorker:
    """Take a uid for the role, lay out the folder and start a worker process in `sandbox` (process.plan_sandbox):
    the candidate's, or with `role="reference"` the task's reference (`source` is then the task module, sizes
    applied; its file stays root's and read-only, so not even the task's own code can change it)."""
    plan = role_plan(sandbox)
    try:
        env, fd = lay_out_workdir(shared, plan, {} if role == "reference" else {"candidate.py": source})
    except BaseException:
        release_role(plan)
        raise
    if role == "reference":  # root's own file in the role's folder: read-only to the reference, unseen by others
        safe_fs.write_new(fd, "candidate.py", source.encode(), 0o444)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    try:
        worker = WorkerProcess(shared, env, plan, int(host_mem_gb * 2**30), role, folder_fd=fd)
    except BaseException:
        os.close(fd)
        release_role(plan)
        raise
    return StartedWorker(worker, plan, shared / "candidate.py", interpret)


def rewrite_candidate(started: StartedWorker, source: str) -> None:
    """Put `source` in the started worker's candidate file (a standby's, written empty when it started): a fresh
    file renamed over the name, relative to the folder's descriptor, so nothing the sandbox planted is followed."""
    owner = (started.plan.uid, started.plan.gid) if started.plan.uid is not None else None
    safe_fs.replace_file(started.worker.folder_fd, started.cand_path.name, source.encode(), 0o644, owner)

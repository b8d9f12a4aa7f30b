"""Every role in its own OS sandbox (sandbox/box.py, issue 25 items 1, 2 and 5), on CPU with real judges:

- the candidate cannot see, signal or read the task's reference process, its task file or its transfer files;
- no process a candidate or a task starts (a setsid daemon through posix_spawn, a double fork) outlives its sample;
- where a sandbox uid cannot run the interpreter, verification refuses before anything runs;
- `unsafe_no_sandbox` runs, and says so in the verdict.

Each test fails when its defence is removed: without PID namespaces the candidate finds the reference by its
command line; without them the daemons live on; without the start-up check verification runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest
from judges import shared_folder_root

from kernelzero.types import Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.sandbox import box, process
from kernelzero.verify.sandbox.box import SandboxUnavailable
from kernelzero.verify.sandbox.process import task_launcher

LAUNCH = task_launcher()  # task code runs only in the verifier's sandbox

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
CANDIDATE = (KERNELS / "correct" / "triton_leaky_relu.py").read_text()
FORWARD = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
TASK = """
import torch
import torch.nn as nn
{prelude}

class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, self.negative_slope)

def get_inputs():
    return [torch.randn(1000)]

def get_init_inputs():
    return [0.1]
"""
OPTS = options_for(device="cpu", trials=2, compile_check=False, static_checks=False)

# On its first forward call: looks for the reference everywhere a same-machine process could, and fails loudly
# (so the verdict is not `correct`) if it finds anything it can see, signal, read or link.
REACH = """
        import glob as _glob, os as _os, signal as _signal
        _found = []
        for _pid in _os.listdir("/proc"):
            if not _pid.isdigit() or int(_pid) == _os.getpid():
                continue
            try:
                _cmd = open(f"/proc/{_pid}/cmdline", "rb").read()
            except OSError:
                continue
            if b"reference" in _cmd or b"judge" in _cmd:
                _found.append(("process", _pid))
                for _sig in (_signal.SIGSTOP, _signal.SIGKILL):
                    try:
                        _os.kill(int(_pid), _sig)
                        _found.append(("signalled", _pid))
                    except OSError:
                        pass
                try:
                    open(f"/proc/{_pid}/mem", "rb").close()
                    _found.append(("mem", _pid))
                except OSError:
                    pass
        _own = _os.path.dirname(_os.environ.get("KZ_XFER_OUT", "/nonexistent"))
        for _path in _glob.glob("/tmp/kz-ref-*/candidate.py") + _glob.glob("/tmp/kz-*/**/candidate.py", recursive=True):
            if not _os.path.samefile(_os.path.dirname(_path), _os.getcwd()):
                _found.append(("task file", _path))
                try:
                    open(_path, "a").close()
                    _found.append(("task file writable", _path))
                except OSError:
                    pass
        for _path in _glob.glob("/dev/shm/kz-xfer-*/*/*") + _glob.glob("/tmp/kz-xfer-*/*/*"):
            if not _path.startswith(_own):
                _found.append(("transfer file", _path))
                try:
                    _os.link(_path, _os.path.join(_os.getcwd(), "tmp", "kept"))
                    _found.append(("hard link", _path))
                except OSError:
                    pass
        if _found:
            raise RuntimeError(f"reached the reference: {_found[:6]}")
"""


def test_the_candidate_cannot_see_signal_read_or_link_anything_of_the_reference():
    reacher = CANDIDATE.replace(FORWARD, FORWARD + REACH)
    assert reacher != CANDIDATE
    verdict = verify(Task(name="fine/leaky", source=TASK.format(prelude="")), reacher, "triton", OPTS)
    assert verdict.status == "correct", (verdict.status, verdict.message, verdict.error_log[-800:])


@pytest.fixture
def markers():
    """A folder outside /tmp (the sandbox's /tmp is private) that every sandbox uid may write, removed afterwards."""
    folder = shared_folder_root() / f".kz-markers-{uuid.uuid4().hex[:12]}"
    folder.mkdir(mode=0o1777)
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# Starts a setsid daemon (posix_spawn) and a double-forked child; each writes `started`, then waits for the test's
# `go` file and would write `survived`. `{token}` marks their command lines, so the test can look for them.
SPAWN = """
import os as _os, sys as _sys
_code = (
    "import os, sys, time\\n"
    "open(os.path.join(sys.argv[1], 'started-' + sys.argv[2]), 'w').close()\\n"
    "while not os.path.exists(os.path.join(sys.argv[1], 'go')): time.sleep(0.05)\\n"
    "open(os.path.join(sys.argv[1], 'survived-' + sys.argv[2]), 'w').close()\\n"
)
_os.posix_spawn(_sys.executable, [_sys.executable, "-c", _code, {folder!r}, "daemon", {token!r}], dict(_os.environ), setsid=True)
if _os.fork() == 0:
    if _os.fork() == 0:
        _os.setsid()
        _os.execv(_sys.executable, [_sys.executable, "-c", _code, {folder!r}, "orphan", {token!r}])
    _os._exit(0)
_os.wait()
"""


def _with_token(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("who", ["candidate", "task"])
def test_no_daemon_or_double_fork_outlives_its_sample(who, markers):
    token = f"kz-daemon-{uuid.uuid4().hex}"
    spawn = SPAWN.format(folder=str(markers), token=token)
    if who == "candidate":
        indented = "".join(f"        {line}\n" for line in spawn.strip().splitlines())
        candidate, task = CANDIDATE.replace(FORWARD, FORWARD + indented), TASK.format(prelude="")
    else:
        candidate, task = CANDIDATE, TASK.format(prelude=spawn)
    verdict = verify(Task(name="fine/leaky", source=task), candidate, "triton", OPTS)
    assert verdict.status == "correct", (verdict.status, verdict.message, verdict.error_log[-800:])
    assert {p.name for p in markers.iterdir()} >= {"started-daemon", "started-orphan"}  # both ran during the sample
    for _ in range(600):  # the judge's teardown ends after its answer: its namespaces go with it
        if not _with_token(token):
            break
        time.sleep(0.1)
    assert _with_token(token) == [], "a process started in the sample outlived it"
    (markers / "go").touch()
    assert not [p.name for p in markers.iterdir() if p.name.startswith("survived")]


def test_where_a_sandbox_uid_cannot_run_the_interpreter_verification_refuses(monkeypatch, markers):
    locked = markers / "locked"  # root's 0700 folder: no sandbox uid can pass through it (a venv under /root)
    locked.mkdir(mode=0o700)
    os.symlink(os.path.realpath(sys.executable), locked / "python")
    monkeypatch.setattr(sys, "executable", str(locked / "python"))
    monkeypatch.setattr(box, "_checked", {})
    monkeypatch.setattr(process, "_plans", {})
    ran = markers / "ran"
    candidate = CANDIDATE.replace(FORWARD, FORWARD + f"        open({str(ran)!r}, 'w').close()\n")
    with pytest.raises(SandboxUnavailable, match="cannot run"):
        verify(Task(name="fine/leaky", source=TASK.format(prelude="")), candidate, "triton", OPTS)
    assert not ran.exists()  # nothing ran


def test_unsafe_no_sandbox_runs_and_every_verdict_says_so():
    opts = options_for(device="cpu", trials=1, compile_check=False, unsafe_no_sandbox=True)
    verdict = verify(Task(name="fine/leaky", source=TASK.format(prelude="")), CANDIDATE, "triton", opts)
    assert verdict.status == "correct", verdict.message
    assert verdict.notes[0] == process.UNSAFE_NOTE and verdict.notes.count(process.UNSAFE_NOTE) == 1
    rejected = verify(Task(name="fine/leaky", source=TASK.format(prelude="")), "no code", "triton", opts)
    assert rejected.status == "format_error" and process.UNSAFE_NOTE in rejected.notes


def test_two_roles_never_share_a_uid():
    plan = process.plan_sandbox(box.DEFAULT_UIDS, True)
    roles = [process.role_plan(plan) for _ in range(4)]
    try:
        assert len({r.uid for r in roles}) == 4 and all(r.uid >= 1900000000 for r in roles)
    finally:
        for role in roles:
            process.release_role(role)


def test_tasks_check_runs_task_code_in_the_sandbox():
    from kernelzero.tasks.check import CheckOptions, check_tasks

    prelude = (
        "import os as _os\n"
        "if _os.getuid() < 1900000000 or len([p for p in _os.listdir('/proc') if p.isdigit()]) > 8:\n"
        "    raise RuntimeError('task code ran outside the sandbox')\n"
    )
    (check,) = list(
        check_tasks([Task(name="sandboxed", source=TASK.format(prelude=prelude))], CheckOptions(launcher=LAUNCH))
    )
    assert check.ok, (check.error, check.message)

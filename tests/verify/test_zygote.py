"""The fork server (sandbox/zygote.py): workers forked from one interpreter that imported torch, each in the same
sandbox a cold worker gets, on CPU with real judges and a real server.

- a forked candidate runs as a sandbox uid, as process 1 of its own PID namespace, with no network, a private /tmp
  (the server's socket folder unseen), no descriptor of the server or of the connection, and gets its true verdict;
- its exit status reaches the judge; killing its group ends it; the judge's end of the connection closing ends the
  worker and every process of its namespace;
- with `KZ_FORK_SERVER=0` workers start cold, and verdicts say which way each started;
- a judge forked from the server names its caller in its command line, and when its caller's connection closes it gets
  its death signal and leaves no worker and no folder; a judge request that is not launch's is refused (cold start).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernelzero.types import Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.sandbox import box, process, zygote_client
from kernelzero.verify.sandbox.channel import send_obj

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
CANDIDATE = (KERNELS / "correct" / "triton_leaky_relu.py").read_text()
TASK = Task(
    name="leaky_zygote",
    source="""
import torch
import torch.nn as nn

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
""",
)
OPTS = options_for(device="cpu", trials=2, compile_check=False, static_checks=False)

# At the candidate's import: everything a forked worker must not have; fails loudly (no `correct`) if it finds any.
PROBE = """
import glob as _glob, os as _os, socket as _socket
_bad = []
if _os.getuid() == 0 or _os.getgid() == 0:
    _bad.append(("root", _os.getuid()))
if _os.getpid() != 1:
    _bad.append(("not process 1 of its own namespace", _os.getpid()))
_procs = [p for p in _os.listdir("/proc") if p.isdigit()]
for _p in _procs:
    if int(_p) == _os.getpid():  # its own command line is the server's (forked, not executed)
        continue
    try:
        if b"zygote" in open(f"/proc/{_p}/cmdline", "rb").read():
            _bad.append(("sees the fork server", _p))
    except OSError:
        pass
for _fd in _os.listdir("/proc/self/fd"):
    try:
        if _os.readlink(f"/proc/self/fd/{_fd}").startswith("socket:"):
            _bad.append(("socket descriptor", _fd))
    except OSError:
        pass
if _glob.glob("/tmp/kz-zygote-*"):
    _bad.append(("sees the server's folder", _glob.glob("/tmp/kz-zygote-*")))
if [n for _, n in _socket.if_nameindex() if n != "lo"]:
    _bad.append(("network", _socket.if_nameindex()))
if _bad:
    raise RuntimeError(f"forked worker not sandboxed: {_bad}")
"""


@pytest.fixture(scope="module")
def server():
    path = zygote_client.address(wait_s=120)
    assert path and os.path.exists(path), "the fork server did not start"
    return path


def test_a_forked_candidate_is_sandboxed_like_a_cold_one_and_gets_its_verdict(server, monkeypatch):
    probe = verify(TASK, PROBE + CANDIDATE, "triton", OPTS)
    assert probe.status == "correct", (probe.status, probe.message, probe.error_log[-800:])
    assert probe.stage_seconds["forked_cand"] == 1.0 and probe.stage_seconds["forked_ref"] == 1.0
    assert probe.stage_seconds["forked_judge"] == 1.0 and probe.stage_seconds["cpu_s_judge"] < 1.5, probe.stage_seconds
    wrong = verify(TASK, CANDIDATE.replace("x * negative_slope", "x * negative_slope * 3"), "triton", OPTS)
    assert wrong.status == "mismatch", (
        wrong.status,
        wrong.message,
    )  # the forked path reaches real verdicts, not only `correct`
    monkeypatch.setenv(zygote_client.SWITCH_ENV, "0")
    cold = verify(TASK, CANDIDATE, "triton", OPTS)
    assert cold.status == "correct" and cold.stage_seconds["forked_cand"] == 0.0
    assert cold.stage_seconds["forked_judge"] == 0.0


def _started(server: str, monkeypatch, folder: Path):
    """A worker through the server, with nothing sent to it yet: (process, its stdin, the role's plan)."""
    monkeypatch.setenv(zygote_client.SOCKET_ENV, server)
    plan = process.role_plan(process.plan_sandbox(box.DEFAULT_UIDS, True))
    env, fd = process.lay_out_workdir(folder / "box", plan, {"candidate.py": ""})
    os.close(fd)
    r, w = os.pipe()
    spec = box.enter_spec(box.Role(plan.uid, False), folder / "box")
    proc = zygote_client.start([], env, spec, True, None, w)
    os.close(w)
    assert isinstance(proc, zygote_client.ZygoteProcess)
    return proc, r, plan


def _namespace(proc) -> str:
    deadline = time.monotonic() + 10
    while (ns := box.namespace_of(proc.pid)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ns is not None
    return ns


def _gone(pids: list[int], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not [p for p in pids if os.path.exists(f"/proc/{p}")]:
            return True
        time.sleep(0.05)
    return False


def test_exit_status_and_kill_reach_the_judge(server, monkeypatch):
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o711)
        proc, reply, plan = _started(server, monkeypatch, Path(tmp))
        assert proc.poll() is None
        send_obj(proc.stdin.fileno(), {"cmd": "exit"})
        assert proc.wait(timeout=30) == 0
        os.close(reply)
        process.release_role(plan)

        proc, reply, plan = _started(server, monkeypatch, Path(tmp) / "2")
        pids = box.pids_in(_namespace(proc))
        with pytest.raises(Exception) as timed_out:
            proc.wait(timeout=0.2)
        assert "timed out" in str(timed_out.value).lower()
        proc.kill_group()
        assert proc.wait(timeout=10) == -9
        assert _gone(pids + [proc.pid])
        os.close(reply)
        process.release_role(plan)


def test_the_judge_going_away_ends_the_worker_and_its_namespace(server, monkeypatch):
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o711)
        proc, reply, plan = _started(server, monkeypatch, Path(tmp))
        pids = box.pids_in(_namespace(proc))
        assert pids, "the worker's namespace has no process"
        proc.conn.close()  # what the judge's death does to its end of the connection
        assert _gone(pids + [proc.pid]), "a forked worker outlived its judge's connection"
        os.close(reply)
        process.release_role(plan)


def test_a_request_from_a_process_that_is_not_root_is_refused(server):
    code = (
        "import socket, os; os.setgid(65534); os.setuid(65534); s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        f"try:\n    s.connect({server!r}); print('connected')\nexcept OSError as e:\n    print('refused', e.errno)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.startswith("refused"), out  # the socket is root's, mode 0600, in a folder of mode 0700


def test_a_forked_judge_whose_caller_goes_leaves_no_worker_and_no_folder(server, monkeypatch, tmp_path):
    from kernelzero.verify.backends import get_backend
    from kernelzero.verify.judge.judge_io import sandbox_spec
    from kernelzero.verify.judge.run import _judge_env
    from kernelzero.verify.judge.standby import start_judge

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the judge's scratch folders land here
    env = _judge_env(get_backend("triton"), OPTS)
    spec = sandbox_spec(OPTS, False)
    shown = [int(p) for p in os.listdir("/proc") if p.isdigit() and server in _cmdline(int(p))]
    # a child it is forking shows the server's command line until it writes its own: the server descends from none
    (zygote,) = [p for p in shown if not set(shown) & set(_ancestors(p))]
    before = set(_descendants(zygote))
    proc = start_judge(["--parent", str(os.getpid()), "--standby", json.dumps(spec)], env, keep_stdin=True)
    assert isinstance(proc, zygote_client.ZygoteProcess), "the judge was not forked"
    deadline = time.monotonic() + 60  # a standby starts its worker and its reference, then waits for a request
    while time.monotonic() < deadline and (
        len(list(tmp_path.glob("kz-*"))) < 2 or len([p for p in _descendants(zygote) if p not in before]) < 6
    ):
        time.sleep(0.1)
    judges = [p for p in _descendants(proc.pid) if f"--parent\0{os.getpid()}\0" in _cmdline(p)]
    assert len(judges) == 1 and "kernelzero.verify.judge.launch" in _cmdline(judges[0])
    below = [p for p in _descendants(zygote) if p not in before]  # forked by the server too: the judge's workers
    assert len(below) >= 6, below  # the outer processes and the judge, its worker's and its reference's
    proc.conn.close()  # what the caller's death does to its end of the connection
    assert _gone(below + [proc.pid], within_s=60), "a forked judge outlived its caller"
    assert not list(tmp_path.glob("kz-*")), list(tmp_path.iterdir())
    proc.stdin.close()
    proc.stdout.close()


def test_a_judge_or_probe_request_that_is_not_theirs_is_refused(server):
    env = {zygote_client.SOCKET_ENV: server, "PATH": os.environ.get("PATH", "")}
    assert zygote_client.start_judge(["-c", "print(1)", "x"], env) is None  # not `--parent PID ...`
    assert zygote_client.start_judge(["--parent", "1"], env) is None  # no request or standby
    assert zygote_client.start_trusted("probe", ["--help"], env) is None  # a probe's argv is its device alone
    assert zygote_client.start_trusted("shell", ["-c", "id"], env) is None  # no such role (nor a worker's request)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _parents() -> dict[int, int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return parents


def _ancestors(pid: int) -> list[int]:
    parents, found = _parents(), []
    while parents.get(pid, 0) > 1:
        pid = parents[pid]
        found.append(pid)
    return found


def _descendants(pid: int) -> list[int]:
    parents = _parents()
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        kids = [p for p, parent in parents.items() if parent == here]
        found += kids
        todo += kids
    return found


def test_a_child_shares_its_parents_server_while_that_one_lives(server):
    code = "from kernelzero.verify.sandbox import zygote_client as z; print(z.address())"
    env = {**os.environ, "PYTHONPATH": str(process.source_root()), zygote_client.SOCKET_ENV: server}
    shared = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert shared.stdout.strip() == server, shared.stderr[-2000:]
    env[zygote_client.SOCKET_ENV] = "/tmp/kz-zygote-gone-for-good/sock"  # its parent's server has ended: one of its own
    own = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert own.stdout.strip().startswith("/tmp/kz-zygote-") and own.stdout.strip() != server, own.stderr[-2000:]

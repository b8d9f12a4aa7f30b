"""A real `kernelzero serve` on localhost for the service tests: start, raw requests, what it leaves behind."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from kernelzero.service.client import Client
from kernelzero.tasks import load_suite, resize, select

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "tests" / "kernels" / "correct" / "triton_gelu.py").read_text()
NO_KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
SERVER = ("--option", "compile_check=false", "--option", "device=cpu")  # server-side options


def gelu_task():
    return resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(db: Path, port: int, tmpdir: Path, *extra: str) -> subprocess.Popen:
    """A server on `port` whose temp folders all go under `tmpdir` (its TMPDIR); waits until it answers.
    Without a token option in `extra` it runs with --insecure-no-token (loopback)."""
    tmpdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
        "TMPDIR": str(tmpdir),
    }
    if not {"--token-file", "--tokens-file", "--insecure-no-token"} & set(extra):
        extra = ("--insecure-no-token", *extra)
    argv = [sys.executable, "-m", "kernelzero.cli.serve", "--port", str(port), "--db", str(db), *SERVER, *extra]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=open(db.with_suffix(".log"), "ab"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, db.with_suffix(".log").read_text()[-3000:]
        try:
            Client(f"http://127.0.0.1:{port}").health()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("the server did not start")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def raw(url: str, body: bytes | None = None, token: str | None = None, method: str | None = None) -> tuple[int, str]:
    """(status, text) of one request; never raises for an HTTP error status."""
    req = urllib.request.Request(url, data=body, method=method or ("POST" if body is not None else "GET"))
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def post(url: str, body: object, token: str | None = None) -> tuple[int, str]:
    return raw(url + "/v1/verify", json.dumps(body).encode(), token)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def working_in(folder: Path) -> list[str]:
    """Processes whose command line or working folder lies under `folder`: '<pid> <cmdline>'."""
    found, mark = [], str(folder)
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            cwd = ""
        if mark in cmd or cwd.startswith(mark):
            found.append(f"{proc.name} {cmd[:160]}")
    return found


def leftovers(tmpdir: Path, judges: set[int], wait_s: float = 20.0, ignore: str = "") -> tuple[list[str], list[str]]:
    """(processes, folders) still there after up to `wait_s`: processes working under `tmpdir`, anything in
    `tmpdir` (but names starting with `ignore`, when given), and shared-memory transfer folders of `judges`."""
    deadline = time.monotonic() + wait_s
    while True:
        procs = working_in(tmpdir)
        folders = [str(p) for p in tmpdir.iterdir() if not (ignore and p.name.startswith(ignore))]
        shm = Path("/dev/shm")
        folders += [str(p) for pid in judges for p in shm.glob(f"kz-xfer-{pid}-*")] if shm.exists() else []
        if (not procs and not folders) or time.monotonic() > deadline:
            return procs, folders
        time.sleep(0.2)


def judges_of(tmpdir: Path) -> set[int]:
    """Pids of the judge processes working under `tmpdir` now."""
    return {int(p.split()[0]) for p in working_in(tmpdir) if "verify.judge" in p or "verify.launch" in p}

"""1,000 queued requests on a real `kernelzero serve`: every job is persisted, the server's memory stays bounded.

The worker is limited (`--jobs 1`, each verification runs the judge for several seconds), so nearly
all jobs are still queued when we measure. Each candidate carries a 64 KiB comment, so the requests
add up to about 62.5 MiB: a queue that kept queued requests in memory would grow the server by at
least that much. The bound, 32 MiB (half of it), leaves room for what the server may hold legitimately
at a time: one POST body being parsed (50 requests, 3.2 MiB, as bytes and as decoded strings), SQLite's
page cache (2 MiB per connection), the one or two requests the worker has in flight, and allocator
slack; RSS is read from /proc/<pid>/status (VmRSS) after a warm-up job has imported what verification
imports (torch, triton).
"""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from procs import descendants  # noqa: E402

from kernelzero.service.client import Client, request_dict  # noqa: E402
from kernelzero.service.jobs import JobQueue  # noqa: E402
from kernelzero.tasks import load_suite, resize, select  # noqa: E402
from kernelzero.types import to_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "tests" / "kernels" / "correct" / "triton_gelu.py").read_text()
NO_KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
N, PER_POST, PAD = 1000, 50, 64 * 1024
BOUND_MB = N * PAD / 2**20 / 2


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_thousand_queued_requests_are_persisted_and_memory_stays_bounded(tmp_path):
    db, port = tmp_path / "service.sqlite", _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
    }
    log = open(tmp_path / "serve.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelzero.cli.serve", "--port", str(port), "--db", str(db), "--jobs", "1"]
        + ["--option", "compile_check=false", "--insecure-no-token"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    client = Client(f"http://127.0.0.1:{port}")
    below: list[int] = []
    base = peak = 0.0
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                client.health()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        task = resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")
        # warm-up: answered by the static checks, after the worker imported them and torch and triton (store key)
        [warm] = client.wait(client.submit([(task, NO_KERNEL, "triton")]), timeout_s=120, poll_s=0.1)
        assert warm.status == "no_kernel"
        base = _rss_mb(proc.pid)
        task_dict, opts = to_dict(task), {"trials": 1}
        ids, peak = [], base
        for start in range(0, N, PER_POST):
            batch = [
                request_dict(task_dict, f"# request {i}: {'x' * PAD}\n{GELU}", "triton", opts)
                for i in range(start, start + PER_POST)
            ]
            ids += client.submit(batch)
            peak = max(peak, _rss_mb(proc.pid))
        for _ in range(10):  # the worker claims and verifies meanwhile
            time.sleep(0.2)
            peak = max(peak, _rss_mb(proc.pid))
        assert len(set(ids)) == N
        assert peak - base < BOUND_MB, f"RSS grew from {base:.0f} MiB to {peak:.0f} MiB (bound {BOUND_MB:.0f} MiB)"
        below = descendants(proc.pid)  # the judge of the job being verified, if any
    finally:
        proc.terminate()
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        print(f"server RSS: {base:.0f} MiB after warm-up, {peak:.0f} MiB at most after {N} requests")
        for pid in below:  # a judge runs in its own session and would finish on its own: end it now
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        log.close()
    assert code in (0, -signal.SIGTERM)  # stopped by SIGTERM (uvicorn re-raises it after its graceful shutdown)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT id, state, request FROM jobs WHERE id >= ?", (min(ids),)).fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids)
    states = [r[1] for r in rows]
    assert set(states) <= {"queued", "running", "done"}
    assert states.count("queued") > N // 2  # the worker was slow: most still wait, on disk
    candidates = {r[2] for r in rows}
    assert len(candidates) == N and all(len(c) > PAD for c in candidates)
    done = states.count("done") + 1  # and the warm-up job
    assert JobQueue(db).counts() == {"queued": N + 1 - done, "running": 0, "done": done, "failed": 0}  # recovered

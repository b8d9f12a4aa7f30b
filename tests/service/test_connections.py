"""Connections against a real `kernelzero serve` on localhost (issue 27 item 1; service/connections.py).

Thousands of idle connections leave verification and /healthz working; past --max-connections the longest-idle
connection is closed; idle clients, slow headers and slow bodies are closed by their timeouts.
"""

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serving import GELU, NO_KERNEL, ROOT, free_port, gelu_task, post, raw, rss_mb, start, stop  # noqa: E402

from kernelzero.service.client import Client, request_dict  # noqa: E402

# Connections held open while jobs run (fewer where RLIMIT_NOFILE's hard limit is lower). Measured on the 2-core
# CI-sized machine under load (2026-12-02): 5,000 connections opened and accepted in 4.5-10.5 s, 0.8-1.1 s of the
# server's CPU, its RSS 240-340 MiB with them; /healthz 9-76 ms beside them. The two verifications take longer.
IDLE = 5000


def _raise_fd_limit(want: int) -> int:
    """Raise this process's RLIMIT_NOFILE (the server inherits it) towards `want`; the count it allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < ceiling:
        resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    return ceiling


def _fds_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _sockets_of(pid: int) -> int:
    return sum(1 for fd in Path(f"/proc/{pid}/fd").iterdir() if "socket:" in _link(fd))


def _link(path: Path) -> str:
    try:
        return str(path.readlink())
    except OSError:
        return ""


def _connect(port: int, n: int, pid: int | None = None, step: int = 500) -> list[socket.socket]:
    """`n` connections; with the server's `pid`, `step` at a time, each step once the server has accepted the
    last (a full accept queue drops connection attempts, which then wait a second to be sent again)."""
    socks: list[socket.socket] = []
    base = _fds_of(pid) if pid else 0
    while len(socks) < n:
        socks += [socket.create_connection(("127.0.0.1", port)) for _ in range(min(step, n - len(socks)))]
        deadline = time.monotonic() + 30
        while pid and _fds_of(pid) < base + len(socks):
            assert time.monotonic() < deadline, f"the server accepted {_fds_of(pid) - base} of {len(socks)}"
            time.sleep(0.01)
    return socks


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (end of file, or a reset), without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1 << 16) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_thousands_of_idle_connections_then_valid_jobs_complete_and_healthz_answers(tmp_path):
    """Issue 27: at about 1,100 idle connections every verification failed (select() on a judge's pipe numbered
    above 1023). Here IDLE connections stay open (timeouts lengthened for the test) while two jobs verify."""
    count = min(IDLE, _raise_fd_limit(IDLE + 1000) - 1000)
    if count < 1200:
        pytest.skip(f"RLIMIT_NOFILE allows {count + 1000} descriptors")
    port = free_port()
    args = ("--max-connections", str(count + 100), "--idle-timeout-s", "300", "--read-timeout-s", "300")
    proc = start(tmp_path / "service.sqlite", port, tmp_path / "tmp", "--jobs", "2", *args)
    socks = []
    try:
        opened = time.monotonic()
        socks = _connect(port, count, proc.pid)  # and the server has accepted them all
        opened = time.monotonic() - opened
        assert _sockets_of(proc.pid) > count
        started = time.monotonic()
        assert raw(f"http://127.0.0.1:{port}/healthz")[0] == 200
        health_s = time.monotonic() - started
        client = Client(f"http://127.0.0.1:{port}")
        task = gelu_task()
        verdicts = client.verify_batch([(task, GELU, "triton", {}), (task, NO_KERNEL, "triton", {"trials": 1})], 120)
        assert [v.status for v in verdicts] == ["correct", "no_kernel"]
        assert sum(map(_closed, socks)) == 0  # all still open: verification ran beside them
        assert health_s < 2.0, f"/healthz took {health_s:.2f} s beside {count} connections"
        print(f"{count} idle connections open in {opened:.2f} s; /healthz {health_s * 1000:.0f} ms; ", end="")
        print(f"server RSS {rss_mb(proc.pid):.0f} MiB")
    finally:
        for s in socks:
            s.close()
        stop(proc)


def test_past_the_cap_the_longest_idle_connection_is_closed(tmp_path):
    port = free_port()
    proc = start(tmp_path / "service.sqlite", port, tmp_path / "tmp", "--max-connections", "20")
    socks = _connect(port, 60)
    try:
        deadline = time.monotonic() + 10
        while (open_now := [s for s in socks if not _closed(s)]) and len(open_now) > 20:
            assert time.monotonic() < deadline, f"{len(open_now)} of 60 still open, cap 20"
            time.sleep(0.1)
        assert socks[-1] in open_now and socks[0] not in open_now  # the oldest idle went first
        assert raw(f"http://127.0.0.1:{port}/healthz")[0] == 200  # a new client gets in beside 20 idle ones
        # the cap, the listener, the one being closed; the /healthz connection may still be closing just after its
        # answer (23 once in CI, 2026-12-02), so the count must settle there, not hold at once
        deadline = time.monotonic() + 5
        while (held := _sockets_of(proc.pid)) > 22:
            assert time.monotonic() < deadline, f"the server still holds {held} sockets, cap 20"
            time.sleep(0.1)
    finally:
        for s in socks:
            s.close()
        stop(proc)


def _closed_after(sock: socket.socket, send: list[bytes], every_s: float, limit_s: float) -> float | None:
    """Send `send` a piece every `every_s`; seconds until the server closed the connection without an answer
    (None if it answered or was still open after `limit_s`)."""
    started, pieces = time.monotonic(), list(send)
    sock.settimeout(every_s)
    while time.monotonic() - started < limit_s:
        if pieces:
            try:
                sock.sendall(pieces.pop(0))
            except OSError:
                return time.monotonic() - started
        try:
            data = sock.recv(1 << 16)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - started
        return time.monotonic() - started if data == b"" else None
    return None


def test_idle_clients_slow_headers_and_slow_bodies_are_closed_by_their_timeouts(tmp_path):
    """--idle-timeout-s 1, --read-timeout-s 3: an idle connection is closed after about 1 s; headers or a body
    sent a few bytes at a time, after about 3 s (bytes arriving do not extend the deadline)."""
    port = free_port()
    db = tmp_path / "service.sqlite"
    proc = start(db, port, tmp_path / "tmp", "--idle-timeout-s", "1", "--read-timeout-s", "3")
    headers = [b"GET /healthz HTTP/1.1\r\n"] + [b"X-Slow: 1\r\n"] * 40
    body = [b"POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"] + [b'{"requests": '] * 40
    cases = {"idle": ([], 0.5), "headers": (headers, 0.25), "body": (body, 0.25)}
    took: dict[str, float | None] = {}
    socks = {name: socket.create_connection(("127.0.0.1", port)) for name in cases}
    threads = [
        threading.Thread(target=lambda n=name: took.__setitem__(n, _closed_after(socks[n], *cases[n], 10.0)))
        for name in cases
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert took["idle"] is not None and 0.8 < took["idle"] < 2.5, took
        assert took["headers"] is not None and 2.5 < took["headers"] < 5.0, took
        assert took["body"] is not None and 2.5 < took["body"] < 5.0, took
        assert raw(f"http://127.0.0.1:{port}/healthz")[0] == 200
        with socket.create_connection(("127.0.0.1", port)) as keep:  # a whole request in time is answered, however
            keep.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # long the connection lives after
            keep.settimeout(5)
            assert keep.recv(1 << 16).startswith(b"HTTP/1.1 200")
    finally:
        for s in socks.values():
            s.close()
        stop(proc)
    assert "unexpected" not in db.with_suffix(".log").read_text()  # a body cut off by the timeout is no error


def test_bodies_are_read_a_few_at_a_time(tmp_path):
    """--max-uploads 1: while a slow body holds the one slot, a whole valid body waits its turn (bodies in memory
    stay at most max_uploads x max_body); it is answered once the read timeout has closed the slow one."""
    port = free_port()
    args = ("--max-uploads", "1", "--idle-timeout-s", "1", "--read-timeout-s", "3")
    proc = start(tmp_path / "service.sqlite", port, tmp_path / "tmp", *args)
    try:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b'POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"requests": ')
            time.sleep(0.3)  # its handler has taken the slot
            started = time.monotonic()
            status, text = post(
                f"http://127.0.0.1:{port}", {"requests": [request_dict(gelu_task(), NO_KERNEL, "triton")]}
            )
            waited = time.monotonic() - started
        assert status == 200, text
        assert 2.0 < waited < 6.0, f"answered after {waited:.2f} s"
    finally:
        stop(proc)


def test_limits_that_cannot_hold_are_refused_at_start(tmp_path):
    """--max-connections beyond what RLIMIT_NOFILE leaves beside verification's reserve, and an idle timeout longer
    than the read timeout: the server refuses to start, saying why."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
        "TMPDIR": str(tmp_path),
    }
    argv = [sys.executable, "-m", "kernelzero.cli.serve", "--db", str(tmp_path / "db"), "--insecure-no-token"]
    argv += ["--port", str(free_port())]
    cases = [
        (("--max-connections", "1000"), "--max-connections 1000 needs 1288 descriptors"),
        (("--idle-timeout-s", "10", "--read-timeout-s", "5"), "0 < idle_s <= read_s"),
    ]
    for args, said in cases:
        done = subprocess.run(
            [*argv, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (600, 600)),
        )
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr[-500:])
    assert not (tmp_path / "db").exists()

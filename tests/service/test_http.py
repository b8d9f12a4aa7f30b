"""The HTTP service end to end: a real `kernelzero serve` process on localhost, the stdlib client."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from kernelzero.service.client import Client, ServiceError, request_dict  # noqa: E402
from kernelzero.tasks import load_suite, resize, select  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "tests" / "kernels" / "correct" / "triton_gelu.py").read_text()
TOKEN = "s3cret-token"
SERVER = ("--option", "compile_check=false", "--option", "device=cpu")  # server-side options: clients cannot set them


def _task():
    return resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(db: Path, port: int, *extra: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelzero.cli.serve", "--port", str(port), "--db", str(db), *SERVER, *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(db.with_suffix(".log"), "ab"),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, db.with_suffix(".log").read_text()
        try:
            Client(f"http://127.0.0.1:{port}").health()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server did not start")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _raw(url: str, body: bytes | None = None, token: str | None = TOKEN, method: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method=method or ("POST" if body is not None else "GET"))
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module: {"url", "db", "port", "args", "proc"}; the restart test replaces "proc"."""
    tmp = tmp_path_factory.mktemp("serve")
    (tmp / "token").write_text(TOKEN + "\n")
    port = _free_port()
    args = ("--jobs", "2", "--token-file", str(tmp / "token"), "--max-body-mb", "0.25")
    state = {"url": f"http://127.0.0.1:{port}", "db": tmp / "service.sqlite", "port": port, "args": args}
    state["proc"] = _start(state["db"], port, *args)
    yield state
    _stop(state["proc"])


def test_verify_through_the_client_and_metrics(server):
    server = server["url"]
    assert Client(server).health()["ok"] is True  # /healthz needs no token
    assert _raw(server + "/healthz", token=None, method="HEAD")[0] == 200
    client = Client(server, token=TOKEN)
    task = _task()
    verdicts = client.verify_batch(
        [(task, GELU, "triton", {}), (task, "not python (", "triton", {"trials": 2})],
        timeout_s=120,
    )
    assert [v.status for v in verdicts] == ["correct", "format_error"]
    assert verdicts[0].task == "level1/21_GELU"
    assert client.verify(task, "not python (", "triton", profile="strict").status == "format_error"
    status, text = _raw(server + "/metrics")
    assert status == 200
    assert 'kernelzero_jobs{state="done"} 3' in text and 'kernelzero_jobs{state="queued"} 0' in text
    assert 'kernelzero_verdicts{status="correct"} 1' in text
    assert 'kernelzero_verdicts{status="format_error"} 2' in text


def test_errors(server):
    server = server["url"]
    body = json.dumps({"requests": [request_dict(_task(), "x", "triton")]}).encode()
    assert _raw(server + "/v1/verify", body, token=None)[0] == 401
    assert _raw(server + "/v1/verify", body, token="wrong")[0] == 401
    assert _raw(server + "/metrics", token=None)[0] == 401
    with pytest.raises(ServiceError) as err:
        Client(server).submit([(_task(), "x", "triton")])
    assert err.value.code == 401
    client = Client(server, token=TOKEN)
    with pytest.raises(ServiceError) as err:
        client.submit([(_task(), "x" * 300_000, "triton")])
    assert err.value.code == 413
    with pytest.raises(ServiceError) as err:
        client.submit([(_task(), "x", "opencl")])
    assert err.value.code == 422 and "requests[0].backend" in err.value.detail
    with pytest.raises(ServiceError) as err:
        client.submit([(_task(), "x", "triton", {"no_such_option": 1})])
    assert err.value.code == 422 and "options.no_such_option" in err.value.detail
    with pytest.raises(ServiceError) as err:
        client.submit([(_task(), "x", "triton", {"compile_check": False})])  # server configuration only
    assert err.value.code == 422 and "options.compile_check: not settable by clients" in err.value.detail
    with pytest.raises(ServiceError) as err:
        client.submit([{"task": {"name": "t"}, "candidate": "x", "backend": "triton"}])
    assert err.value.code == 422
    assert _raw(server + "/v1/verify", b"{not json")[0] == 400
    assert _raw(server + "/v1/verify", b'{"reqs": []}')[0] == 422
    with pytest.raises(ServiceError) as err:
        client.job(999_999)
    assert err.value.code == 404


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_restart_after_sigkill_finishes_each_job_once(server):
    """Runs last: SIGKILL the module's server while a job runs, start it again on the same db."""
    db, port, proc = server["db"], server["port"], server["proc"]
    client = Client(server["url"], token=TOKEN)
    with sqlite3.connect(db) as con:
        before = con.execute("SELECT id, completions, attempts, finished FROM jobs WHERE state = 'done'").fetchall()
        verdict_rows = con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    assert all(r[1] == 1 for r in before)  # with the whole module: the 3 jobs of the first test
    [slow] = client.submit([(_task(), GELU, "triton", {"trials": 2})])  # a new request
    deadline = time.monotonic() + 30
    while client.job(slow)["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    judges = _children(proc.pid)  # the judge runs in its own session: end it too, as a dead host would
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for pid in judges:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT state FROM jobs WHERE id = ?", (slow,)).fetchone() == ("running",)
    server["proc"] = _start(db, port, *server["args"])
    verdict = client.wait([slow], timeout_s=120, poll_s=0.2)[0]
    assert verdict.status == "correct"
    with sqlite3.connect(db) as con:
        after = con.execute("SELECT id, completions, attempts, finished FROM jobs WHERE id != ?", (slow,)).fetchall()
        row = con.execute("SELECT state, completions, attempts FROM jobs WHERE id = ?", (slow,)).fetchone()
        stored = con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
    assert sorted(after) == sorted(before)  # done jobs were not run again
    assert row == ("done", 1, 2)  # claimed before the kill and once after; completed once
    assert stored == verdict_rows + 1  # its verdict row exists once

"""Issue 27 against a real `kernelzero serve` on loopback: one server per database, the database's bounds, task code
at the door and in the sandbox, and a job that kills its server (each case bounded: seconds, a few jobs).

The crash-loop case needs task code able to kill the server: only `--unsafe-no-sandbox` lets it (in the sandbox
the task sees no process of the server's), so that one server runs unsafe, on loopback, for this test alone.
"""

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from dataclasses import replace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serving import GELU, NO_KERNEL, ROOT, SERVER, free_port, gelu_task, post, raw, start, stop  # noqa: E402

from kernelzero.service.client import Client, request_dict  # noqa: E402

TOKEN = "db-test-token"


def _argv(db, port: int, *extra: str) -> list[str]:
    """The server's command line; without a token option in `extra` it serves loopback with --insecure-no-token."""
    if not {"--token-file", "--tokens-file", "--insecure-no-token"} & set(extra):
        extra = ("--insecure-no-token", *extra)
    return [sys.executable, "-m", "kernelzero.cli.serve", "--port", str(port), "--db", str(db), *SERVER, *extra]


def _env(tmpdir) -> dict:
    tmpdir.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
        "TMPDIR": str(tmpdir),
    }


def _wait(client: Client, ids: list[int], timeout_s: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = [client.job(i) for i in ids]
        if all(j["state"] in ("done", "failed") for j in jobs):
            return jobs
        assert time.monotonic() < deadline, [j["state"] for j in jobs]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Finished jobs and verdicts kept 8.6 s (--keep-days 0.0001): the runner prunes every 2.2 s."""
    tmp = tmp_path_factory.mktemp("servicedb")
    (tmp / "token").write_text(TOKEN)
    port = free_port()
    args = ("--token-file", str(tmp / "token"), "--keep-days", "0.0001")
    proc = start(tmp / "service.sqlite", port, tmp / "tmp", *args)
    yield {"url": f"http://127.0.0.1:{port}", "proc": proc, "tmp": tmp, "db": tmp / "service.sqlite"}
    stop(proc)


def test_a_second_server_on_the_same_db_refuses_to_start_and_names_the_first(server):
    """Issue 27: two servers on one --db verified each other's jobs, and one's start-up re-ran the other's."""
    done = subprocess.run(
        _argv(server["db"], free_port()), env=_env(server["tmp"] / "tmp2"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"another kernelzero serve (pid {server['proc'].pid}) is using the database" in done.stderr
    assert "Traceback" not in done.stderr
    assert raw(server["url"] + "/healthz")[0] == 200  # the first one is untouched


def test_the_database_is_private_and_old_jobs_and_verdicts_are_deleted(server):
    """Issue 27: the database only grew (13 MiB/s under one sequential client). Finished jobs and verdicts older
    than --keep-days go; the file, its WAL and the lock are the server's user's alone."""
    client = Client(server["url"], token=TOKEN)
    task = gelu_task()
    ids = client.submit([(task, NO_KERNEL, "triton", {"trials": t}) for t in (1, 2, 3)])
    assert [j["status"] for j in _wait(client, ids)] == ["no_kernel"] * 3
    db = server["db"]
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + ".lock")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    deadline = time.monotonic() + 30
    while raw(f"{server['url']}/v1/jobs/{ids[0]}", token=TOKEN)[0] != 404:
        assert time.monotonic() < deadline, "finished jobs were not deleted"
        time.sleep(0.5)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        assert con.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM jobs WHERE id IN (?, ?, ?)", ids).fetchone()[0] == 0
        assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # freed pages go back to the file system


def test_task_code_that_fails_the_static_checks_is_refused_at_the_door(server):
    """And a malformed Task.tie_prone, which the judge would only fail on later."""
    task = gelu_task()
    cases = [
        (task.source + "\nimport subprocess\n", "imports subprocess: starts processes"),
        (task.source + "\nimport os\nos.kill(1, 9)\n", "uses .kill: signals processes"),
        (task.source.replace("class Model", "class Other"), "no top-level `Model`"),
        ("x = " + "+".join(["1"] * 60_000) + "\n", "nested too deeply"),
    ]
    for source, named in cases:
        body = {
            "requests": [
                request_dict(task, NO_KERNEL, "triton", {}),
                request_dict(replace(task, source=source), NO_KERNEL, "triton", {}),
            ]
        }
        code, text = post(server["url"], body, TOKEN)
        assert code == 422 and "request 1: task.source" in text and named in text, (code, text[:500])
    for tie_prone, named in (({"0": "output 0 dim -1"}, "its own values"), ({"x": "input 0 dim 1"}, "not an output")):
        body = {"requests": [request_dict(replace(task, tie_prone=tie_prone), NO_KERNEL, "triton", {})]}
        code, text = post(server["url"], body, TOKEN)
        assert code == 422 and "request 0: task.tie_prone" in text and named in text, (code, text[:500])


def test_task_code_runs_in_the_sandbox_and_cannot_reach_the_server(server):
    """Issue 27: a task's code read /etc/shadow, the token and the database, and SIGKILLed the server. Here it
    tries all of that (hiding the kill from the static checks) and reports what it saw in its own error."""
    paths = [str(server["db"]), str(server["tmp"] / "token"), "/etc/shadow"]
    snoop = f"""
import os as _os
_seen = []
for _path in {paths!r}:
    try:
        with open(_path, "rb") as _f:
            _seen.append(_path + ": read " + str(len(_f.read())) + " bytes")
    except OSError as _exc:
        _seen.append(_path + ": " + type(_exc).__name__)
_servers = 0
for _pid in _os.listdir("/proc"):
    try:
        with open("/proc/" + _pid + "/cmdline", "rb") as _f:
            if {str(server["db"]).encode()!r} in _f.read():  # this test's server only
                _servers += 1
                getattr(_os, "ki" + "ll")(int(_pid), 9)
    except (OSError, ValueError):
        pass
raise RuntimeError("SNOOP " + "; ".join(_seen) + "; servers seen: " + str(_servers))
"""
    task = replace(gelu_task(), name="snoop", source=gelu_task().source + snoop)
    client = Client(server["url"], token=TOKEN)
    [job] = _wait(client, client.submit([(task, GELU, "triton", {})]))
    message = job["verdict"]["message"]
    assert job["status"] == "task_broken" and "SNOOP" in message, message
    assert "read" not in message.split("SNOOP")[1] and "servers seen: 0" in message, message
    assert server["proc"].poll() is None and raw(server["url"] + "/healthz")[0] == 200


def test_the_server_refuses_to_start_where_it_cannot_sandbox(tmp_path):
    """The sandbox check fails (a uid range it cannot use): one clear line, exit 3, nothing listening."""
    port = free_port()
    argv = _argv(tmp_path / "service.sqlite", port, "--option", "sandbox_uids=5:1")
    done = subprocess.run(argv, env=_env(tmp_path / "tmp"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "kernelzero serve: refused: sandbox_uids: '5:1' out of range" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "service.sqlite.lock").exists()  # before the database


def test_max_queued_counts_running_jobs_and_the_size_bound_deletes_the_oldest(tmp_path):
    """Issue 27: --max-queued never triggered. It counts every unfinished job (queued and running); past
    --max-db-mb the oldest finished jobs go first."""
    port = free_port()
    proc = start(
        tmp_path / "service.sqlite", port, tmp_path / "tmp", "--jobs", "1", "--max-queued", "2", "--max-db-mb", "1"
    )
    try:
        client, task = Client(f"http://127.0.0.1:{port}"), gelu_task()
        big = NO_KERNEL + "# " + "x" * 240_000 + "\n"  # a 240 KB candidate
        ids = []
        for trials in (1, 2, 3, 4, 5):
            ids += client.submit([(task, big, "triton", {"trials": trials})])
            _wait(client, ids[-1:])
        db = tmp_path / "service.sqlite"
        assert (db.stat().st_size + db.with_name(db.name + "-wal").stat().st_size) < 1.6 * 2**20
        assert raw(f"http://127.0.0.1:{port}/v1/jobs/{ids[0]}")[0] == 404 and client.job(ids[-1])["state"] == "done"
        slow = replace(task, name="slow", source=task.source + "\nimport time\ntime.sleep(120)\n")
        client.submit([(slow, GELU, "triton", {"trials": 1}), (slow, GELU, "triton", {"trials": 2})])
        deadline = time.monotonic() + 30
        while client.job(ids[-1] + 1)["state"] != "running":  # one running, one queued
            assert time.monotonic() < deadline
            time.sleep(0.2)
        code, text = post(f"http://127.0.0.1:{port}", {"requests": [request_dict(task, NO_KERNEL, "triton", {})]})
        assert code == 429 and "2 jobs not finished, at most 2" in json.loads(text)["detail"], text
    finally:
        stop(proc)


def test_a_job_that_kills_its_server_twice_is_failed_and_the_jobs_behind_it_run(tmp_path):
    """Issue 27: a task that SIGKILLed the server was queued again by every restart, and 3 valid jobs queued behind
    it never ran. Each restart counts a loss; the lost job is then verified alone; the second loss fails it."""
    db, port = tmp_path / "service.sqlite", free_port()
    killer = f"""
import os as _os
for _pid in _os.listdir("/proc"):
    try:
        with open("/proc/" + _pid + "/cmdline", "rb") as _f:
            _cmd = _f.read()
    except OSError:
        continue
    if b"kernelzero.cli.serve" in _cmd and {str(db).encode()!r} in _cmd:
        getattr(_os, "ki" + "ll")(int(_pid), 9)
"""
    task = gelu_task()
    args = ("--unsafe-no-sandbox", "--jobs", "2")
    proc = start(db, port, tmp_path / "tmp", *args)
    try:
        client = Client(f"http://127.0.0.1:{port}")
        ids = client.submit([(replace(task, name="killer", source=task.source + killer), GELU, "triton", {})])
        ids += client.submit([(task, NO_KERNEL, "triton", {"trials": t}) for t in (1, 2, 3)])
        assert proc.wait(120) == -9  # the first death
        log = open(db.with_suffix(".log"), "ab")
        proc = subprocess.Popen(_argv(db, port, *args), env=_env(tmp_path / "tmp"), stdout=log, stderr=log)
        assert proc.wait(120) == -9  # the second, with the killer verified alone
        proc = start(db, port, tmp_path / "tmp", *args)
        jobs = _wait(client, ids)
    finally:
        stop(proc)
    assert jobs[0]["state"] == "failed" and "the server died 2 times" in jobs[0]["error"], jobs[0]
    assert [(j["state"], j["status"]) for j in jobs[1:]] == [("done", "no_kernel")] * 3

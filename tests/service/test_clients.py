"""Clients and tokens of a real `kernelzero serve` on localhost (issue 27 items 2 and 7).

The server refuses to start without a token unless told `--insecure-no-token`, which serves loopback only and
says so; with `--tokens-file` each client reads only its own jobs (another's is 404, as an unknown one is), and
what a job returns holds no server path and nothing of another client's request.
"""

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serving import GELU, NO_KERNEL, ROOT, free_port, gelu_task, raw, start, stop  # noqa: E402

from kernelzero.cli.serve import client_tokens  # noqa: E402
from kernelzero.service.client import Client, ServiceError  # noqa: E402
from kernelzero.service.jobs import JobQueue  # noqa: E402

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"
SECRET = "ALICE-ONLY-7f3a"  # in alice's task and candidate: never in what bob reads


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clients")
    (tmp / "tokens").write_text(f"# name token\nalice {ALICE}\n\nbob {BOB}\n")
    port = free_port()
    proc = start(tmp / "service.sqlite", port, tmp / "tmp", "--tokens-file", str(tmp / "tokens"), "--jobs", "2")
    yield {"url": f"http://127.0.0.1:{port}", "db": tmp / "service.sqlite", "tmp": tmp / "tmp"}
    stop(proc)


def _serve(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`kernelzero serve` with `args`, expected to refuse at once."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p),
        "TMPDIR": str(tmp_path),
    }
    argv = [sys.executable, "-m", "kernelzero.cli.serve", "--port", str(free_port()), "--db", str(tmp_path / "db")]
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_server_refuses_to_start_without_a_token(tmp_path):
    for args, said in [
        ((), "give one of --token-file, --tokens-file or --insecure-no-token"),
        (("--insecure-no-token", "--host", "0.0.0.0"), "--host 0.0.0.0 is not a loopback address"),
    ]:
        done = _serve(tmp_path, *args)
        assert done.returncode == 2 and said in done.stderr, (args, done.returncode, done.stderr[-500:])
    assert not (tmp_path / "db").exists()  # refused before anything started


def test_token_options_and_tokens_files_are_checked(tmp_path):
    files = {"token": "one-token\n", "tokens": "alice a-token\nalice b-token\n", "three": "alice a-token x\n"}
    files |= {"empty": "# nobody\n", "name": "al/ice a-token\n", "reused": "alice t-token\nbob t-token\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    cases = [
        ({"insecure_no_token": True, "token_file": "token"}, "give one of"),
        ({"token_file": "token", "tokens_file": "tokens"}, "give one of"),
        ({"tokens_file": "tokens"}, "tokens:2: the name of alice is used twice"),
        ({"tokens_file": "reused"}, "reused:2: the token of bob is used twice"),
        ({"tokens_file": "three"}, "three:1: want `NAME TOKEN`, got 3 fields"),
        ({"tokens_file": "empty"}, "empty names no client"),
        ({"tokens_file": "name"}, "name:1: a name is 1-64 of"),
        ({"insecure_no_token": True, "host": "10.1.2.3"}, "not a loopback address"),
    ]
    for given, said in cases:
        args = {"token_file": None, "tokens_file": None, "insecure_no_token": False, "host": "127.0.0.1"}
        args |= {k: tmp_path / v if k.endswith("_file") else v for k, v in given.items()}
        with pytest.raises(ValueError, match=re.escape(said)):
            client_tokens(argparse.Namespace(**args))
    ok = {"token_file": None, "tokens_file": None, "insecure_no_token": True}
    assert client_tokens(argparse.Namespace(**ok, host="::1")) is None
    assert client_tokens(
        argparse.Namespace(**{**ok, "insecure_no_token": False, "token_file": tmp_path / "token"}, host="0.0.0.0")
    ) == {"": "one-token"}


def test_insecure_no_token_serves_loopback_and_says_so(tmp_path):
    port = free_port()
    proc = start(tmp_path / "service.sqlite", port, tmp_path / "tmp", "--insecure-no-token", "--host", "127.0.0.1")
    try:
        assert Client(f"http://127.0.0.1:{port}").submit([(gelu_task(), "not python (", "triton")])
    finally:
        stop(proc)
    log = (tmp_path / "service.log").read_text()
    assert "INSECURE: --insecure-no-token: no token; bound to 127.0.0.1 (loopback) only" in log


def test_a_client_reads_only_its_own_jobs(server):
    url = server["url"]
    alice, bob = Client(url, token=ALICE), Client(url, token=BOB)
    [mine] = alice.submit([(gelu_task(), "not python (", "triton")])
    [theirs] = bob.submit([(gelu_task(), "not python ((", "triton")])
    assert alice.wait([mine], timeout_s=60, poll_s=0.1)[0].status == "format_error"
    assert raw(f"{url}/v1/jobs/{mine}", token="no-such-token")[0] == 401
    for reader, job in ((bob, mine), (alice, theirs)):
        with pytest.raises(ServiceError) as err:
            reader.job(job)
        assert (err.value.code, err.value.detail) == (404, f"no job {job}")  # as for an unknown id
    with pytest.raises(ServiceError) as err:
        bob.job(theirs + 1000)
    assert (err.value.code, err.value.detail) == (404, f"no job {theirs + 1000}")
    assert bob.job(theirs)["id"] == theirs
    with sqlite3.connect(server["db"]) as con:
        rows = dict(con.execute("SELECT id, client FROM jobs WHERE id IN (?, ?)", (mine, theirs)).fetchall())
    assert rows == {mine: "alice", theirs: "bob"}


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_what_a_client_reads_holds_no_server_path_and_nothing_of_another_client(server):
    """Alice's task fails to import (its traceback runs through kernelzero's source, which the database keeps);
    bob's job runs beside it. Neither reads a server path; bob reads nothing of alice's request."""
    url, task = server["url"], gelu_task()
    alice, bob = Client(url, token=ALICE), Client(url, token=BOB)
    # it keeps its Model (the door's contract check) and fails only when the reference imports it
    broken = replace(
        task, name=f"broken-{SECRET}", source=task.source + f"\nraise RuntimeError('{SECRET} cannot be imported')\n"
    )
    [hers] = alice.submit([(broken, f"# {SECRET}\n{GELU}", "triton")])
    [his] = bob.submit([(task, NO_KERNEL, "triton", {"trials": 1})])
    deadline = time.monotonic() + 120
    while {alice.job(hers)["state"], bob.job(his)["state"]} & {"queued", "running"}:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    her_job, his_job = alice.job(hers), bob.job(his)
    assert (her_job["status"], his_job["status"]) == ("task_broken", "no_kernel")
    assert SECRET in her_job["verdict"]["message"]  # her own task's error is hers to read
    source = str(ROOT / "src")
    with sqlite3.connect(server["db"]) as con:
        stored = con.execute("SELECT verdict FROM jobs WHERE id = ?", (hers,)).fetchone()[0]
    assert source in stored  # the database keeps the traceback's paths: the redaction is what hides them
    private = [source, sys.prefix, str(server["tmp"]), str(server["db"].parent), str(ROOT)]
    for job in (her_job, his_job):
        for text in _strings(job):
            assert not [p for p in private if p in text], text[:500]
    assert "<kernelzero>/kernelzero/" in her_job["verdict"]["message"]
    assert SECRET not in json.dumps(his_job)


def test_an_existing_database_gets_the_client_column(tmp_path):
    """Jobs from before clients had names belong to the shared token's client ""; named clients do not see them."""
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as con:
        con.execute(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, request TEXT NOT NULL, state TEXT NOT NULL, "
            "status TEXT, verdict TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0, completions INTEGER NOT "
            "NULL DEFAULT 0, created REAL NOT NULL, started REAL, finished REAL)"
        )
        con.execute("INSERT INTO jobs (request, state, created) VALUES ('{}', 'queued', 0)")
    queue = JobQueue(db)
    assert queue.get(1, client="")["state"] == "queued"
    assert queue.get(1, client="alice") is None
    JobQueue(db)  # a second open finds the column there

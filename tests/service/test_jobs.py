"""The job queue and its runner in one process (no HTTP): isolation between jobs, coalescing, readable records.

Valid jobs here are answered by the static checks (a candidate without a kernel: no judge process), so
they are fast; the one job that makes the verifier raise runs a real judge on a task whose source raises.
"""

import json
import math
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("pydantic")  # the service extra (not on every GPU image)

from kernelzero.service.database import Retention, prepare  # noqa: E402
from kernelzero.service.jobs import LOST, SCHEMA, JobQueue, json_safe  # noqa: E402
from kernelzero.service.runner import JobRunner  # noqa: E402
from kernelzero.service.schema import BodyError  # noqa: E402
from kernelzero.service.store import VerdictStore  # noqa: E402
from kernelzero.tasks import load_suite, resize, select  # noqa: E402
from kernelzero.types import to_dict, verdict_from_dict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "tests" / "kernels" / "correct" / "triton_gelu.py").read_text()
NO_KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
SERVER = {"device": "cpu", "compile_check": False}


def _task():
    return resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")


def _request(task, candidate: str, **options) -> dict:
    return {"task": to_dict(task), "candidate": candidate, "backend": "triton", "options": options}


def _drain(queue: JobQueue, runner: JobRunner, ids: list[int], timeout_s: float = 90.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runner.run_once()
        jobs = [queue.get(i) for i in ids]
        if all(j["state"] in ("done", "failed") for j in jobs):
            return jobs
    raise AssertionError(f"jobs not finished: {[queue.get(i)['state'] for i in ids]}")


def test_a_request_that_makes_the_verifier_raise_gets_task_broken_alone(tmp_path):
    task = _task()
    broken = replace(
        task, name="broken", source=task.source + "\nraise RuntimeError('this reference cannot be imported')\n"
    )
    queue = JobQueue(tmp_path / "service.sqlite")
    runner = JobRunner(queue, jobs=2, store=VerdictStore(tmp_path / "service.sqlite"), options=SERVER)
    ids = queue.submit(
        [_request(task, NO_KERNEL), _request(broken, GELU), _request(task, NO_KERNEL, trials=2)]
        + [_request(task, NO_KERNEL, profile="strict")]
    )
    jobs = _drain(queue, runner, ids)
    assert [j["state"] for j in jobs] == ["done"] * 4
    assert [j["status"] for j in jobs] == ["no_kernel", "task_broken", "no_kernel", "no_kernel"]
    broken_verdict = jobs[1]["verdict"]
    assert broken_verdict["stage"] == "reference" and broken_verdict["message"].startswith("the task itself is broken")
    assert "cannot be imported" in broken_verdict["message"] and jobs[1]["error"] is None
    assert queue.counts() == {"queued": 0, "running": 0, "done": 4, "failed": 0}
    assert VerdictStore(tmp_path / "service.sqlite").counts() == {"no_kernel": 3}  # task_broken is not stored


def test_a_verifier_fault_in_a_claimed_batch_is_each_jobs_verdict_and_strands_none(tmp_path):
    """The verdict store's table is gone (a real SQLite fault inside the pool): every job of the batch gets its
    own `infra_error` verdict at stage "exception"; none is left running or failed."""
    queue = JobQueue(tmp_path / "service.sqlite")
    runner = JobRunner(queue, jobs=2, store=VerdictStore(tmp_path / "service.sqlite"), batch=3, options=SERVER)
    with sqlite3.connect(tmp_path / "service.sqlite") as con:
        con.execute("DROP TABLE verdicts")
    task = _task()
    ids = queue.submit([_request(task, NO_KERNEL, trials=t) for t in (1, 2, 3)])
    jobs = _drain(queue, runner, ids)
    assert [(j["state"], j["status"]) for j in jobs] == [("done", "infra_error")] * 3
    assert all(j["verdict"]["stage"] == "exception" and "OperationalError" in j["verdict"]["message"] for j in jobs)
    assert all(len(j["verdict"]["message"]) <= 500 for j in jobs)
    assert queue.counts() == {"queued": 0, "running": 0, "done": 3, "failed": 0}


def test_a_stored_verdict_is_never_failed_and_fail_only_moves_running_jobs(tmp_path):
    queue = JobQueue(tmp_path / "service.sqlite")
    [job] = queue.submit([_request(_task(), NO_KERNEL)])
    assert queue.fail(job, "not claimed yet") is False  # queued: untouched
    [(claimed, request)] = queue.claim(1)
    req = JobRunner(queue, options=SERVER)._request(claimed, request, "k")
    from kernelzero.verify import verify

    assert queue.finish(claimed, verify(req.task, req.candidate, "triton", req.options))
    assert queue.fail(claimed, "a late failure") is False
    assert queue.get(claimed)["state"] == "done" and queue.get(claimed)["error"] is None


def test_identical_requests_in_flight_share_one_verification(tmp_path):
    queue = JobQueue(tmp_path / "service.sqlite")
    runner = JobRunner(queue, jobs=2, store=None, options=SERVER)  # no store: only coalescing can share
    task = _task()
    ids = queue.submit([_request(task, NO_KERNEL)] * 3 + [_request(task, NO_KERNEL, trials=3)])
    jobs = _drain(queue, runner, ids)
    assert runner.verifications == 2  # three identical requests, one different
    assert [j["state"] for j in jobs] == ["done"] * 4
    assert jobs[0]["verdict"] == jobs[1]["verdict"] == jobs[2]["verdict"]  # one verdict, stage timings included
    with sqlite3.connect(tmp_path / "service.sqlite") as con:
        assert con.execute("SELECT SUM(completions) FROM jobs").fetchone()[0] == 4


def test_non_finite_values_in_a_verdict_are_read_back_as_null(tmp_path):
    queue = JobQueue(tmp_path / "service.sqlite")
    runner = JobRunner(queue, options=SERVER)
    [job] = queue.submit([_request(_task(), NO_KERNEL)])
    [(job, request)] = queue.claim(1)
    req = runner._request(job, request, "k")
    from kernelzero.verify import verify

    verdict = replace(verify(req.task, req.candidate, "triton", req.options), atol=math.nan, rtol=math.inf)
    assert queue.finish(job, verdict)
    got = queue.get(job)
    json.dumps(got, allow_nan=False)  # what the HTTP reply needs
    assert got["verdict"]["atol"] is None and got["verdict"]["rtol"] is None
    assert verdict_from_dict(got["verdict"]).status == "no_kernel"
    with sqlite3.connect(tmp_path / "service.sqlite") as con:  # a row written by an older server, with NaN
        con.execute("UPDATE jobs SET verdict = ? WHERE id = ?", (json.dumps({"atol": math.nan}), job))
    assert queue.get(job)["verdict"] == {"atol": None}
    assert json_safe({"e": "\ud800x"}) == {"e": "?x"}


def test_submit_validates_all_or_none_and_bounds_the_queue(tmp_path):
    queue = JobQueue(tmp_path / "service.sqlite", max_queued=3)
    task = _task()
    with pytest.raises(BodyError) as err:
        queue.submit([_request(task, NO_KERNEL), _request(task, NO_KERNEL, unsafe_no_sandbox=True)])
    assert err.value.code == 422 and err.value.detail.startswith("request 1: options.unsafe_no_sandbox")
    assert queue.counts()["queued"] == 0
    queue.submit([_request(task, NO_KERNEL)] * 3)
    with pytest.raises(BodyError) as err:
        queue.submit([_request(task, NO_KERNEL)])
    assert err.value.code == 429
    with pytest.raises(ValueError, match="unknown verify option"):
        JobRunner(queue, options={"no_such_option": 1})


def test_an_old_database_is_migrated_and_a_job_lost_twice_is_failed(tmp_path):
    """Issue 27: a job whose server died was queued again by every restart. A database made before `lost` gets
    the column; each start-up counts a loss for a job left running; such a job is claimed only alone; the second
    loss fails it. A server stopped in order gives its jobs back without a loss."""
    db, task = tmp_path / "service.sqlite", _task()
    request = json.dumps(_request(task, NO_KERNEL))
    with sqlite3.connect(db) as con:  # the table as servers before issue 27 made it
        con.executescript(SCHEMA)
        con.execute("INSERT INTO jobs (request, state, created) VALUES (?, 'running', 0)", (request,))
        con.execute("INSERT INTO jobs (request, state, created) VALUES (?, 'queued', 0)", (request,))
    queue = JobQueue(db)  # a start-up: the migration, then one loss
    assert queue.get(1)["state"] == "queued" and queue.get(2)["state"] == "queued"
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT id, lost FROM jobs ORDER BY id").fetchall() == [(1, 1), (2, 0)]
    assert [job_id for job_id, _ in queue.claim(5)] == [2]  # never with others
    assert queue.release([2]) == 1 and queue.claim_lost()[0] == 1 and queue.claim_lost() is None
    queue = JobQueue(db)  # the server died again while job 1 ran alone
    assert queue.get(1)["state"] == "failed" and queue.get(1)["error"] == LOST and "died 2 times" in LOST
    assert queue.get(2)["state"] == "queued" and queue.counts()["running"] == 0


def test_the_recheck_of_a_failed_batch_runs_side_by_side_within_each_budget(tmp_path):
    """Issue 27: two tasks sleeping at import delayed a 12 s valid job by 1,837 s in the one-by-one re-check.
    The batch the pool held when its stream ended is verified again side by side, each job finished as its own
    answer comes: the valid job at once, a request whose budget is spent with infra_error at once, a slow one with
    infra_error when its budget ends (its judge is not waited for)."""
    db, task = tmp_path / "service.sqlite", _task()
    queue = JobQueue(db)
    # the import limit (3 s) ends the judge left behind soon after the test
    runner = JobRunner(queue, jobs=2, store=VerdictStore(db), options={**SERVER, "build_timeout_s": 3})
    slow = replace(task, name="slow", source=task.source + "\nimport time\ntime.sleep(20)\n")
    ids = queue.submit([_request(slow, GELU), _request(slow, GELU, trials=2), _request(task, NO_KERNEL)])
    import torch  # noqa: F401 - imported once, as in a server that ran before (not part of what is timed)

    runner._register(queue.claim(3))  # what the pool held when its stream ended
    key = {held[0]: key for key, held in runner.inflight.items()}
    runner.deadlines[key[ids[0]]] = time.monotonic() + 4.0  # what is left of each one's time budget
    runner.deadlines[key[ids[1]]] = time.monotonic() - 1.0
    start = time.time()
    assert runner._isolate() == 3
    jobs = [queue.get(i) for i in ids]
    assert [j["status"] for j in jobs] == ["infra_error", "infra_error", "no_kernel"]
    assert all("time budget" in j["verdict"]["message"] and j["verdict"]["stage"] == "runner" for j in jobs[:2])
    assert jobs[2]["finished"] - start < 2.0 and jobs[1]["finished"] - start < 1.0  # neither waited for the slow one
    assert 3.9 < jobs[0]["finished"] - start < 6.0  # the slow one: cut at its own budget


def test_a_full_database_refuses_new_jobs_when_only_unfinished_ones_fill_it(tmp_path):
    db = tmp_path / "service.sqlite"
    prepare(db)
    VerdictStore(db)
    queue = JobQueue(db, retention=Retention(db, max_db_mb=0.5))
    big = NO_KERNEL + "# " + "x" * 200_000 + "\n"
    queue.submit([_request(_task(), big, trials=t) for t in (1, 2, 3)])  # the file was small: taken
    with pytest.raises(BodyError) as err:
        queue.submit([_request(_task(), NO_KERNEL)])
    assert err.value.code == 429 and "the service's database is full" in err.value.detail
    assert queue.counts()["queued"] == 3  # unfinished jobs are never deleted


def test_a_claim_the_database_refuses_ends_the_stream_in_order_and_the_jobs_run_later(tmp_path):
    """A claim that fails (the file locked past the queue's timeout) is logged and ends that stream without
    raising; nothing is left running, and the jobs run once the database answers again."""
    db = tmp_path / "service.sqlite"
    queue = JobQueue(db, timeout_s=0.2)
    runner = JobRunner(queue, jobs=2, store=VerdictStore(db), options=SERVER)
    ids = queue.submit([_request(_task(), NO_KERNEL, trials=t) for t in (1, 2)])
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert runner.run_once() == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert queue.counts()["running"] == 0
    assert [j["status"] for j in _drain(queue, runner, ids)] == ["no_kernel", "no_kernel"]


def test_retention_bounds_must_be_positive(tmp_path):
    for keep_days, max_db_mb in ((0, 10), (1, -1)):
        with pytest.raises(ValueError, match="must be positive"):
            Retention(tmp_path / "service.sqlite", keep_days=keep_days, max_db_mb=max_db_mb)

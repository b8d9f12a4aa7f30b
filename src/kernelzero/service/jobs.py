"""A durable job queue for the verification service, in SQLite, and the worker that drains it.

    queue = JobQueue("service.sqlite")                     # table `jobs`, beside the store's `verdicts`
    ids = queue.submit([{"task": to_dict(task), "candidate": src, "backend": "triton", "options": {}}])
    worker = Worker(queue, jobs=2, store=VerdictStore("service.sqlite")).start()
    queue.get(ids[0])   # {"id": 1, "state": "queued" | "running" | "done" | "failed", "verdict": {...} | None, ...}

A job row holds its request as JSON (the task as `to_dict(Task)`, the candidate, the backend, the
verifier option overrides as a dict), its state and, once done, the verdict as JSON. States:

- queued: waiting; running: claimed by a worker; done: the verdict is stored and never recomputed;
- failed: the verifier itself raised (a bug in kernelzero, not a candidate fault); `error` says why.

`JobQueue(path)` puts jobs left `running` by a killed server back to `queued` when the server opens
it (`recover()`), so a restart loses nothing; a done job is never claimed again, and a job whose
verification finished before the kill but was not yet marked done is answered from the verdict
store instead of being verified again. `finish()` only moves a job from running to done, so a job
completes once (`completions` counts it).

The worker pulls jobs from SQLite a few at a time (`batch`), never the whole queue, and feeds them
to `kernelzero.service.pool.verify_many`, which keeps at most `2 * jobs` in flight.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.store import VerdictStore
from kernelzero.types import Task, Verdict, from_dict, to_dict
from kernelzero.verify.options import BACKENDS, VerifyOptions, options_for

log = logging.getLogger(__name__)

STATES = ("queued", "running", "done", "failed")
SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    request TEXT NOT NULL,
    state TEXT NOT NULL,
    status TEXT,
    verdict TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    completions INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    started REAL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, id);
"""


def check_request(request: dict) -> tuple[Task, str, str, VerifyOptions]:
    """Validate one request dict; return its parts. Raises ValueError with a clear message."""
    if not isinstance(request, dict):
        raise ValueError("a request must be an object")
    unknown = set(request) - {"task", "candidate", "backend", "options"}
    if unknown:
        raise ValueError(f"unknown request field(s) {sorted(unknown)}")
    backend = request.get("backend")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    candidate = request.get("candidate")
    if not isinstance(candidate, str):
        raise ValueError("candidate must be a string")
    raw_task = request.get("task")
    if not isinstance(raw_task, dict):
        raise ValueError("task must be an object with the fields of kernelzero.types.Task")
    try:
        task = from_dict(Task, raw_task)
    except TypeError as exc:
        raise ValueError(f"task: {exc}") from None
    if not isinstance(task.name, str) or not isinstance(task.source, str):
        raise ValueError("task.name and task.source must be strings")
    options = request.get("options") or {}
    if not isinstance(options, dict):
        raise ValueError("options must be an object of VerifyOptions overrides")
    try:
        opts = options_for(**options)
    except TypeError as exc:
        raise ValueError(f"options: {exc}") from None
    return task, candidate, backend, opts


class JobQueue:
    """Verification jobs in one SQLite file (WAL), shared by the HTTP handlers and the worker thread."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0, recover: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._local = threading.local()
        self.wake = threading.Event()  # set on submit so an idle worker starts at once
        db = self._connect()
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        if recover:
            self.recover()

    def _connect(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            self._local.db = db
        return db

    def recover(self) -> int:
        """Put jobs left `running` (by a killed server) back to `queued`; return how many."""
        return self._connect().execute("UPDATE jobs SET state = 'queued' WHERE state = 'running'").rowcount

    def submit(self, requests: list[dict]) -> list[int]:
        """Validate and enqueue requests (all or none); return their job ids in order."""
        for i, request in enumerate(requests):
            try:
                check_request(request)
            except ValueError as exc:
                raise ValueError(f"request {i}: {exc}") from None
        db, now = self._connect(), time.time()
        ids = []
        db.execute("BEGIN IMMEDIATE")
        try:
            for request in requests:
                cur = db.execute(
                    "INSERT INTO jobs (request, state, created) VALUES (?, 'queued', ?)", (json.dumps(request), now)
                )
                ids.append(cur.lastrowid)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.wake.set()
        return ids

    def claim(self, n: int) -> list[tuple[int, dict]]:
        """Atomically move up to `n` of the oldest queued jobs to running; return (id, request) pairs."""
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute(
                "SELECT id, request FROM jobs WHERE state = 'queued' ORDER BY id LIMIT ?", (n,)
            ).fetchall()
            now = time.time()
            for job_id, _ in rows:
                db.execute(
                    "UPDATE jobs SET state = 'running', attempts = attempts + 1, started = ? WHERE id = ?",
                    (now, job_id),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return [(job_id, json.loads(request)) for job_id, request in rows]

    def finish(self, job_id: int, verdict: Verdict) -> bool:
        """Mark a running job done with its verdict; False if it was not running (never overwrites)."""
        cur = self._connect().execute(
            "UPDATE jobs SET state = 'done', status = ?, verdict = ?, finished = ?, completions = completions + 1 "
            "WHERE id = ? AND state = 'running'",
            (verdict.status, json.dumps(to_dict(verdict)), time.time(), job_id),
        )
        return cur.rowcount == 1

    def fail(self, job_id: int, error: str) -> bool:
        cur = self._connect().execute(
            "UPDATE jobs SET state = 'failed', error = ?, finished = ? WHERE id = ? AND state = 'running'",
            (error[-2000:], time.time(), job_id),
        )
        return cur.rowcount == 1

    def get(self, job_id: int) -> dict | None:
        """{"id", "state", "status", "verdict" (a dict or None), "error", "attempts", "created", "finished"}."""
        row = (
            self._connect()
            .execute(
                "SELECT id, state, status, verdict, error, attempts, created, finished FROM jobs WHERE id = ?",
                (job_id,),
            )
            .fetchone()
        )
        if row is None:
            return None
        keys = ("id", "state", "status", "verdict", "error", "attempts", "created", "finished")
        job = dict(zip(keys, row))
        job["verdict"] = json.loads(job["verdict"]) if job["verdict"] else None
        return job

    def counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zeros included)."""
        rows = self._connect().execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {**dict.fromkeys(STATES, 0), **dict(rows)}

    def status_counts(self) -> dict[str, int]:
        """Verdicts of done jobs per status."""
        rows = (
            self._connect().execute("SELECT status, COUNT(*) FROM jobs WHERE state = 'done' GROUP BY status").fetchall()
        )
        return dict(rows)


class Worker:
    """A daemon thread that verifies queued jobs through `verify_many` (`jobs` at a time)."""

    def __init__(
        self,
        queue: JobQueue,
        jobs: int = 2,
        store: VerdictStore | None = None,
        batch: int | None = None,
        idle_s: float = 1.0,
    ):
        self.queue, self.jobs, self.store = queue, max(1, jobs), store
        self.batch = batch or self.jobs
        self.idle_s = idle_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kz-verify-worker", daemon=True)

    def start(self) -> Worker:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self.queue.wake.set()
        self._thread.join(timeout)

    def _requests(self, claimed: set[int]) -> Iterator[VerifyRequest]:
        """Queued jobs as requests, claimed `batch` at a time while verify_many asks; ends when none is queued."""
        while not self._stop.is_set():
            rows = self.queue.claim(self.batch)
            if not rows:
                return
            for job_id, request in rows:
                claimed.add(job_id)
                try:
                    task, candidate, backend, opts = check_request(request)
                except ValueError as exc:  # validated on submit; only a changed kernelzero gets here
                    self.queue.fail(job_id, f"invalid request: {exc}")
                    claimed.discard(job_id)
                    continue
                yield VerifyRequest(task, candidate, backend, opts, tag=job_id)

    def run_once(self) -> int:
        """Verify jobs until none is queued; return how many finished."""
        claimed: set[int] = set()
        finished = 0
        try:
            for req, verdict in verify_many(self._requests(claimed), jobs=self.jobs, store=self.store):
                self.queue.finish(req.tag, verdict)
                claimed.discard(req.tag)
                finished += 1
        except Exception as exc:  # the verifier raised (a kernelzero bug): fail what was in flight, keep serving
            log.exception("verification failed")
            for job_id in claimed:
                self.queue.fail(job_id, f"the verifier raised {type(exc).__name__}: {exc}")
        return finished

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.queue.wake.clear()
            if self.run_once() == 0:
                self.queue.wake.wait(self.idle_s)

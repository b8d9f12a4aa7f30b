"""A durable job queue for the verification service, in SQLite; the runner that drains it is service/runner.py.

    queue = JobQueue("service.sqlite")                     # table `jobs`, beside the store's `verdicts`
    ids = queue.submit([{"task": to_dict(task), "candidate": src, "backend": "triton", "options": {}}])
    runner = JobRunner(queue, jobs=2, store=VerdictStore("service.sqlite"), options={"device": "cpu"}).start()
    queue.get(ids[0])   # {"id": 1, "state": "queued" | "running" | "done" | "failed", "verdict": {...} | None, ...}

A job row holds its request as validated JSON (service/schema.py: the task, the candidate, the backend
and the client's options, which are only those of the allowlist), its state and, once done, the verdict.
The runner adds the server's own options (`options`: sandbox, device, limits, ...) when it verifies.

- queued: waiting; running: claimed by the runner; done: the verdict is stored and never recomputed (a job whose
  verification raised is done too, with its fault verdict: `task_broken` for a broken task, else `infra_error`);
- failed: the stored request no longer validates (only a changed kernelzero gets there), or the job was running
  when a server died twice (`MAX_LOST`, below); `error` says why.

Each job records its `client` (the name of the token that submitted it; "" for the shared token or none, and for
jobs from before clients had names), and `get(id, client=name)` finds only that client's jobs.

Guarantees (each tested in tests/service/; the runner's own are in service/runner.py):
- A claimed job is never left `running` by the runner; a job that got its verdict is never marked failed (`fail`
  only moves a running job).
- Restart: `JobQueue(path)` puts jobs left `running` by a killed server back to `queued` (`recover()`); a
  done job is never claimed again, and one whose verdict was stored before the kill is answered from the
  verdict store; `finish()` only moves a job from running to done, so a job completes once. A server stopped
  in order gives its open jobs back (`release`) without counting them.
- No crash loop: every job found `running` at start-up counts one loss (column `lost`); such a job is then
  verified alone (claimed in a batch of its own, nothing else in flight), so a second death happens with it
  alone; a job lost `MAX_LOST` (2) times is failed with that reason instead of being queued again. A task or
  candidate that kills (or hangs, until someone kills) its server thus costs two restarts, and the jobs queued
  behind it run.
- Readable records: verdicts are stored and returned with non-finite floats as null, texts as valid UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from pathlib import Path

from kernelzero.service.schema import BodyError, RequestIn, parse_request
from kernelzero.service.task_checks import task_problem, tie_problem
from kernelzero.types import Verdict, to_dict

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
MAX_LOST = 2  # a job found running at this many start-ups (its server died holding it) is failed, not queued
LOST = (
    f"the server died {MAX_LOST} times while this job was being verified (killed, or hung until it was killed): "
    "its task or candidate is taken to be what ends the server, and it is not tried again"
)


def add_lost_column(db: sqlite3.Connection) -> None:
    """Migration of a database made before `lost` existed (issue 27): the column, 0 for every job."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    if "lost" not in columns:
        db.execute("ALTER TABLE jobs ADD COLUMN lost INTEGER NOT NULL DEFAULT 0")


def _add_client_column(db: sqlite3.Connection) -> None:
    """Give `jobs` its `client` column (the submitting token's name) where a database from before it lacks it."""
    if "client" not in [row[1] for row in db.execute("PRAGMA table_info(jobs)")]:
        try:
            db.execute("ALTER TABLE jobs ADD COLUMN client TEXT NOT NULL DEFAULT ''")
        except sqlite3.OperationalError as exc:  # another process added it between the check and here
            if "duplicate column" not in str(exc):
                raise


def json_safe(value):
    """`value` with non-finite floats as None and strings as valid UTF-8 (what JSON and SQLite accept)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def stored_request(request: RequestIn) -> dict:
    """The validated request as the queue keeps it (the client's options only, unset ones left out)."""
    return {
        "task": request.task.model_dump(),
        "candidate": request.candidate,
        "backend": request.backend,
        "options": request.options.overrides(),
    }


def coalesce_key(request: dict) -> str:
    """Identical stored requests have the same key (sha256 of their canonical JSON)."""
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


class JobQueue:
    """Verification jobs in one SQLite file (WAL), shared by the HTTP handlers and the runner thread.

    `max_queued`: submit refuses (BodyError 429) a batch that would put more than this many unfinished jobs
    (queued or running) in the database. `retention` (service/database.py): submit first makes room in a database
    over its size bound, or refuses (429); the runner prunes by it.
    """

    def __init__(
        self,
        path: str | Path,
        timeout_s: float = 60.0,
        recover: bool = True,
        max_queued: int = 100_000,
        retention=None,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self.max_queued = max_queued
        self.retention = retention
        self._local = threading.local()
        self.wake = threading.Event()  # set on submit so an idle runner starts at once
        db = self._connect()
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
        add_lost_column(db)
        _add_client_column(db)
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
        """Jobs left `running` by a server that died: each counts one loss; those lost `MAX_LOST` times are failed
        (`LOST`), the others go back to `queued`. Returns how many went back."""
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("UPDATE jobs SET lost = lost + 1 WHERE state = 'running'")
            db.execute(
                "UPDATE jobs SET state = 'failed', error = ?, finished = ? WHERE state = 'running' AND lost >= ?",
                (LOST, time.time(), MAX_LOST),
            )
            back = db.execute("UPDATE jobs SET state = 'queued' WHERE state = 'running'").rowcount
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return back

    def release(self, job_ids: list[int]) -> int:
        """Put running jobs of a server stopping in order back to `queued` (no loss counted); return how many."""
        db = self._connect()
        return sum(
            db.execute("UPDATE jobs SET state = 'queued' WHERE id = ? AND state = 'running'", (i,)).rowcount
            for i in job_ids
        )

    def claim_lost(self) -> tuple[int, dict] | None:
        """Move the oldest queued job that a dead server held (`lost` > 0) to running, to be verified alone."""
        rows = self._claim("SELECT id, request FROM jobs WHERE state = 'queued' AND lost > 0 ORDER BY id LIMIT 1", ())
        return rows[0] if rows else None

    def submit(self, requests: list[dict | RequestIn], client: str = "") -> list[int]:
        """Validate and enqueue requests (all or none) as `client`'s; return their job ids in order.

        Raises BodyError (a ValueError): 422 naming the request and field that does not validate or whose task code
        fails its static checks (service/task_checks.py), 429 when full.
        """
        rows, problems = [], {}  # task source -> what its static checks found (one check per distinct task)
        for i, request in enumerate(requests):
            try:
                parsed = request if isinstance(request, RequestIn) else parse_request(request)
            except BodyError as exc:
                raise BodyError(exc.code, f"request {i}: {exc.detail}") from None
            source = parsed.task.source
            if source not in problems:
                problems[source] = task_problem(source)
            if problems[source]:
                raise BodyError(422, f"request {i}: task.source: {problems[source]}")
            tie = tie_problem(parsed.task.tie_prone)
            if tie:
                raise BodyError(422, f"request {i}: task.tie_prone: {tie}")
            rows.append(json.dumps(stored_request(parsed)))
        if self.retention is not None:
            self.retention.make_room()
        db, now = self._connect(), time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            queued = db.execute("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')").fetchone()[0]
            if queued + len(rows) > self.max_queued:
                raise BodyError(
                    429, f"the queue is full ({queued} jobs not finished, at most {self.max_queued}); retry later"
                )
            insert = "INSERT INTO jobs (request, state, created, client) VALUES (?, 'queued', ?, ?)"
            ids = [db.execute(insert, (row, now, client)).lastrowid for row in rows]
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self.wake.set()
        return ids

    def claim(self, n: int) -> list[tuple[int, dict]]:
        """Atomically move up to `n` of the oldest queued jobs no dead server held to running; (id, request) pairs."""
        return self._claim("SELECT id, request FROM jobs WHERE state = 'queued' AND lost = 0 ORDER BY id LIMIT ?", (n,))

    def _claim(self, select: str, args: tuple) -> list[tuple[int, dict]]:
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = db.execute(select, args).fetchall()
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
            (verdict.status, json.dumps(json_safe(to_dict(verdict)), allow_nan=False), time.time(), job_id),
        )
        return cur.rowcount == 1

    def fail(self, job_id: int, error: str) -> bool:
        """Mark a running job failed; False if it was not running (a done job is never failed)."""
        cur = self._connect().execute(
            "UPDATE jobs SET state = 'failed', error = ?, finished = ? WHERE id = ? AND state = 'running'",
            (json_safe(error[-2000:]), time.time(), job_id),
        )
        return cur.rowcount == 1

    def get(self, job_id: int, client: str | None = None) -> dict | None:
        """{"id", "state", "status", "verdict" (a dict or None), "error", "attempts", "created", "finished"}; None
        if there is no such job, or (with `client`) it is another client's."""
        keys = ("id", "state", "status", "verdict", "error", "attempts", "created", "finished")
        where, args = ("id = ?", (job_id,)) if client is None else ("id = ? AND client = ?", (job_id, client))
        row = self._connect().execute(f"SELECT {', '.join(keys)} FROM jobs WHERE {where}", args).fetchone()
        if row is None:
            return None
        job = dict(zip(keys, row))
        job["verdict"] = json.loads(job["verdict"]) if job["verdict"] else None
        return json_safe(job)  # rows written before values were made safe read back too

    def counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zeros included)."""
        rows = self._connect().execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        return {**dict.fromkeys(STATES, 0), **dict(rows)}

    def status_counts(self) -> dict[str, int]:
        """Verdicts of done jobs per status."""
        rows = self._connect().execute("SELECT status, COUNT(*) FROM jobs WHERE state = 'done' GROUP BY status")
        return dict(rows.fetchall())

"""The runner that drains the verification service's job queue (service/jobs.py) through the verifier's pool.

    runner = JobRunner(queue, jobs=2, store=VerdictStore("service.sqlite"), options={"device": "cpu"}).start()

The runner pulls jobs from SQLite a few at a time (`batch`), never the whole queue, and feeds them to
`kernelzero.service.pool.verify_many`, which keeps at most `2 * jobs` in flight; it adds the server's own options
(`options`: sandbox, device, limits, ...) under the client's when it verifies.

Guarantees (each tested in tests/service/):
- Isolation: the pool turns one request's exception into that request's verdict, so its neighbours complete. Should
  the pool's stream end anyway, the runner verifies each request of the claimed batch that is still open again
  (the others' verdicts were stored meanwhile and come back from the store); one that raises then gets its fault
  verdict; a claimed job is never left `running`.
- Coalescing: identical requests in flight (the same validated request) share one verification.
- Re-check in parallel: when the pool's stream ends early, the open requests are verified again side by side,
  each within what is left of its own time budget (`budget_s`: its judge's limit, counted from when it was
  handed to the pool), so no job waits for another's limits; past it, a job gets `infra_error` (stage runner).
- Jobs a dead server held (`JobQueue.claim_lost`) are verified alone, nothing else in flight.
"""

from __future__ import annotations

import logging
import queue as queues
import threading
import time
from collections.abc import Iterator

from kernelzero.service.contract import fault_of, infra_verdict_of
from kernelzero.service.jobs import JobQueue, coalesce_key
from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.schema import parse_request
from kernelzero.service.store import VerdictStore
from kernelzero.types import Task, Verdict, from_dict
from kernelzero.verify import options_for
from kernelzero.verify.judge.run import budget_s

log = logging.getLogger(__name__)


class JobRunner:
    """A daemon thread that verifies queued jobs through `verify_many` (`jobs` at a time).

    `options`: the server's VerifyOptions overrides (sandbox, device, limits, ...), under the client's own.
    `verifications` counts the verifications started (coalesced jobs share one).
    """

    def __init__(
        self,
        queue: JobQueue,
        jobs: int = 2,
        store: VerdictStore | None = None,
        options: dict | None = None,
        batch: int | None = None,
        idle_s: float = 1.0,
    ):
        self.queue, self.jobs, self.store = queue, max(1, jobs), store
        self.options = dict(options or {})
        options_for(**self.options)  # a bad server configuration fails here, not in every job
        self.batch = batch or self.jobs
        self.idle_s = idle_s
        self.verifications = 0
        self.inflight: dict[str, list[int]] = {}  # coalesce key -> ids of the jobs waiting for its verdict
        self.requests: dict[str, VerifyRequest] = {}  # coalesce key -> its request, while in flight
        self.deadlines: dict[str, float] = {}  # coalesce key -> when its time budget ends (monotonic seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kz-job-runner", daemon=True)

    def start(self) -> JobRunner:
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop claiming, wait up to `timeout` for the thread, then give the jobs still open back to the queue."""
        self._stop.set()
        self.queue.wake.set()
        self._thread.join(timeout)
        self.queue.release(self._open_ids())

    def _open_ids(self) -> list[int]:
        for _ in range(5):  # the runner thread may change `inflight` meanwhile: copy it again
            try:
                return [job_id for ids in list(self.inflight.values()) for job_id in ids]
            except RuntimeError:
                continue
        return []

    def _request(self, job_id: int, request: dict, key: str) -> VerifyRequest | None:
        """The job's VerifyRequest with the server's options; None (the job failed) if it no longer validates."""
        try:
            parsed = parse_request(request)
            task = from_dict(Task, parsed.task.model_dump())
            opts = options_for(**{**self.options, **parsed.options.overrides()})
        except Exception as exc:  # validated on submit: only a changed kernelzero gets here
            self.queue.fail(job_id, f"invalid request: {type(exc).__name__}: {exc}")
            return None
        return VerifyRequest(task, parsed.candidate, parsed.backend, opts, tag=key)

    def _pending(self) -> Iterator[VerifyRequest]:
        """Queued jobs as requests, claimed `batch` at a time while verify_many asks; ends when none is queued.
        A job a dead server held comes first and alone (the stream ends after it). A job identical to one in
        flight joins it instead of being verified again. A claimed batch is registered in `inflight` whole before
        its first request is yielded, so `_isolate` finds every claimed job should the stream end early; a claim
        that fails (SQLite) ends the stream in order, so the requests in flight still get their verdicts."""
        lost = self._claim(self.queue.claim_lost) if not self.inflight else None
        if lost:
            yield from self._register(lost)
            return
        while not self._stop.is_set():
            rows = self._claim(lambda: self.queue.claim(self.batch))
            if not rows:
                return
            yield from self._register(rows)

    def _claim(self, claim) -> list[tuple[int, dict]]:
        try:
            found = claim()
        except Exception:  # the database failed (locked past the timeout, disk full): end this stream in order
            log.exception("claiming jobs failed")
            return []
        return [found] if isinstance(found, tuple) else (found or [])

    def _register(self, rows: list[tuple[int, dict]]) -> list[VerifyRequest]:
        fresh = []
        for job_id, request in rows:
            key = coalesce_key(request)
            if key in self.inflight:
                self.inflight[key].append(job_id)
                continue
            req = self._request(job_id, request, key)
            if req is not None:
                self.inflight[key], self.requests[key] = [job_id], req
                self.deadlines[key] = time.monotonic() + budget_s(req.options)
                self.verifications += 1
                fresh.append(req)
        return fresh

    def _finish(self, key: str, verdict: Verdict) -> int:
        self.requests.pop(key, None)
        self.deadlines.pop(key, None)
        return sum(self.queue.finish(job_id, verdict) for job_id in self.inflight.pop(key, []))

    def run_once(self) -> int:
        """Verify jobs until none is queued; return how many finished."""
        finished = 0
        try:
            for req, verdict in verify_many(self._pending(), jobs=self.jobs, store=self.store):
                finished += self._finish(req.tag, verdict)
        except Exception as exc:  # the stream ended early: verify what is open again, side by side
            left = len(self.requests)
            log.warning("the pool raised %s; verifying the %d open requests again", type(exc).__name__, left)
            finished += self._isolate()
        return finished

    def _isolate(self) -> int:
        """Verify each open request of the claimed batches again, each alone in a thread of its own, all side by
        side; each job is finished as soon as its own answer comes. One that raises gets its fault verdict
        (`contract.fault_of`); verdicts stored while the pool wound down come back from the store; a request whose
        time budget ends first gets `infra_error` (stage runner) and is not waited for."""
        answers: queues.Queue = queues.Queue()
        waiting = dict(self.requests)
        for key, req in waiting.items():
            if self.deadlines.get(key, 0.0) > time.monotonic():
                threading.Thread(target=lambda k=key, r=req: answers.put((k, self._alone(r))), daemon=True).start()
        finished = 0
        while waiting:
            first = min(waiting, key=lambda k: self.deadlines.get(k, 0.0))
            try:
                key, verdict = answers.get(timeout=max(0.0, self.deadlines.get(first, 0.0) - time.monotonic()))
            except queues.Empty:
                spent = budget_s(waiting[first].options)
                message = f"the pool failed while this request was in it, and its time budget ({spent:.0f} s) ran out"
                key, verdict = first, infra_verdict_of(waiting[first], message)
            if waiting.pop(key, None) is not None:
                finished += self._finish(key, verdict)
        return finished

    def _alone(self, req: VerifyRequest) -> Verdict:
        try:
            [(_, verdict)] = list(verify_many([req], jobs=1, store=self.store, standby=0))
        except Exception as exc:
            verdict = fault_of(req, exc)
        return verdict

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.queue.wake.clear()
            try:
                busy = self.run_once()
                self._prune()
            except Exception:  # the queue itself failed (disk full, say): log, wait, try again
                log.exception("the job runner failed")
                busy = 0
            if busy == 0:
                self.queue.wake.wait(self.idle_s)

    def _prune(self) -> None:
        """The database's retention policy (service/database.py), when a prune is due."""
        retention = self.queue.retention
        if retention is not None and retention.due():
            pruned = retention.prune()
            if pruned["jobs"] or pruned["verdicts"]:
                log.info(
                    "retention: deleted %(jobs)d jobs and %(verdicts)d verdicts; the database is %(mb)s MiB", pruned
                )

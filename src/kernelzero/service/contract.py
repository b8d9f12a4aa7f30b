"""The contract both verification pools keep: the local one (service/pool.py) and the Ray one (service/ray_pool.py).

    req = VerifyRequest(task, completion, "cuda", options_for())
    check_request(req)                       # an unknown backend: the caller's error, raised before anything runs
    verdict = rejected(req)                  # format and static checks: no process, no build
    if verdict is None and needs_build(req, gpus=True):
        ...                                  # the backend's build stage, on CPU cores
    verdict, attempts = retry_once(req, lambda fresh: guarded(req, lambda: verify(...)))
    answer = keep(store, store_key(req, device), verdict, attempts)

Why one module: the two pools are two schedulers of the same work, and a candidate must get the same verdict, the
same notes and the same store key whichever pool runs it. What they share:

- the request record, `VerifyRequest` (also importable from `kernelzero.service.pool`);
- the pre-checks, `rejected`: extraction, the format check and the static checks run before anything is built or
  started, so a rejected candidate never costs a build or a GPU slot (its verdict is the one `verify()` would give);
- the build decision, `needs_build`: a backend whose record asks for a build stage (`Backend.build_stage`) and a
  request that runs on a GPU; a request for the CPU is never built ahead;
- the retry-once rule, `Attempts` and `retry_once`: a verification whose judge died (killed, out of memory; for
  Ray also a dead actor) is tried once more in a fresh process; a second death gives `infra_error` at stage
  `runner` (not the candidate's verdict: rewards and metrics skip it); an answer after one death carries the note
  `RETRIED (why)`;
- one sample never stops a batch, `guarded`: an exception raised while verifying one request becomes that
  request's verdict (`verify.verdicts.fault_verdict`: `task_broken` for a broken task, else `infra_error` at stage
  `exception`); only a request the pool cannot take at all (`check_request`: an unknown backend) raises;
- the verdict store's keys and notes: `store_key`, `from_store` (the note `STORE_NOTE`) and `keep` (stores first,
  then adds the retry note, so a stored verdict never claims a retry of a later run).

Run it through either pool: `kernelzero.service.pool.verify_many(requests, pool="local" | "ray")`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kernelzero.extract import extract_code
from kernelzero.service.store import VerdictStore, request_key
from kernelzero.types import Task, Verdict
from kernelzero.verify import VerifyOptions, fault_verdict, get_backend, infra_verdict, precheck

STORE_NOTE = "answered from the verdict store"
RETRIED = "retried once: the first runner died"
ATTEMPTS = 2  # a verification is tried at most this often when its judge (or runner) dies


@dataclass(frozen=True)
class VerifyRequest:
    """One candidate to verify."""

    task: Task  # the task, sizes applied
    candidate: str  # a completion or a source
    backend: str  # a name in kernelzero.verify.BACKENDS ("cuda", "triton")
    options: VerifyOptions  # verifier options
    tag: object = None  # the caller's handle (e.g. (task name, sample index)), passed back untouched


# -- before anything runs ------------------------------------------------------------------------------------------


def check_request(req: VerifyRequest) -> None:
    """Raise ValueError for a request no pool can take (an unknown backend): the caller's error, not a verdict."""
    get_backend(req.backend)


def fault_of(req: VerifyRequest, exc: BaseException) -> Verdict:
    """The verdict of `req` whose verification raised `exc` (`fault_verdict`: `task_broken` or `infra_error`)."""
    return fault_verdict(req.task, extract_code(req.candidate), req.backend, req.options, exc)


def infra_verdict_of(req: VerifyRequest, message: str) -> Verdict:
    """The `infra_error` verdict (stage `runner`) of `req` that the pool could not verify, saying why."""
    return infra_verdict(req.task, extract_code(req.candidate), req.backend, req.options, "runner", message)


def guarded(req: VerifyRequest, run: Callable[[], Verdict | None]) -> Verdict | None:
    """`run()`, or the verdict of the exception it raised (`fault_of`), so one sample's failure becomes that
    sample's verdict and never ends a batch."""
    try:
        return run()
    except Exception as exc:
        return fault_of(req, exc)


def rejected(req: VerifyRequest) -> Verdict | None:
    """The verdict of a candidate the format or static checks reject (no process started), else None."""
    return precheck(req.task, extract_code(req.candidate), req.backend, req.options)


def runs_on_gpu(req: VerifyRequest, gpus: bool) -> bool:
    """Whether `req` runs on a GPU, in a pool that has GPUs when `gpus` is True."""
    return gpus and req.options.device != "cpu"


def needs_build(req: VerifyRequest, gpus: bool) -> bool:
    """Whether `req` goes through its backend's build stage first (only requests the pre-checks let through)."""
    return runs_on_gpu(req, gpus) and get_backend(req.backend).build_stage


# -- the retry-once rule -------------------------------------------------------------------------------------------


def judge_died(verdict: Verdict) -> bool:
    """The verifier's judge process died and nothing retried it yet (`crash` at stage "judge"). verify() retries
    its own judge's death once (alone on the GPU) and answers `infra_error` at stage "judge" after a second death:
    that answer is final here, so a request is never tried more than twice."""
    return verdict.status == "crash" and verdict.stage == "judge"


@dataclass
class Attempts:
    """The deaths of one request's verifications so far, and what the retry-once rule makes of them."""

    deaths: list[str] = field(default_factory=list)  # why each attempt's judge or runner died

    def died(self, why: str) -> bool:
        """Record a death; True when the request is to be tried again (in a fresh judge or runner)."""
        self.deaths.append(why)
        return len(self.deaths) < ATTEMPTS

    def noted(self, verdict: Verdict) -> Verdict:
        """`verdict` with the retry note when exactly one attempt died before it."""
        if len(self.deaths) != 1:
            return verdict
        return replace(verdict, notes=verdict.notes + (f"{RETRIED} ({self.deaths[0]})",))

    def give_up(self, req: VerifyRequest, last: Verdict | None, device: str = "cpu") -> Verdict:
        """The `infra_error` verdict (stage `runner`) after the last allowed death; `last`: its verdict, if it had
        one (its device and log are kept; a dead Ray actor leaves none, `device` then names the runner's)."""
        message = f"the runner died twice ({'; '.join(self.deaths)})"
        extra = {"device": device}
        if last is not None:
            extra = {"device": last.device, "error_log": last.error_log, "notes": last.notes}
        source = extract_code(req.candidate)
        return infra_verdict(req.task, source, req.backend, req.options, "runner", message, **extra)


def retry_once(
    req: VerifyRequest, attempt: Callable[[bool], Verdict], on_retry: Callable[[], None] | None = None
) -> tuple[Verdict, Attempts]:
    """Run `attempt(fresh)` (fresh: False the first time, True for the retry) under the retry-once rule.

    `on_retry()` is called before the second attempt. Returns the answer and the attempts' record; the answer has
    no retry note yet: `keep` adds it once the store has the verdict.
    """
    attempts = Attempts()
    verdict = attempt(False)
    while judge_died(verdict):
        if not attempts.died(verdict.message):
            return attempts.give_up(req, verdict), attempts
        if on_retry is not None:
            on_retry()
        verdict = attempt(True)
    return verdict, attempts


# -- the verdict store ---------------------------------------------------------------------------------------------


def store_key(req: VerifyRequest, device: str) -> str:
    """The store key of `req` verified on `device` (a GPU's name, or "cpu")."""
    return request_key(req.task, req.candidate, req.backend, req.options, device)


def from_store(store: VerdictStore | None, key: str | None) -> Verdict | None:
    """The stored verdict for `key`, noted as answered from the store; None when there is none (or no store)."""
    hit = store.get(key) if store is not None and key is not None else None
    return None if hit is None else replace(hit, notes=hit.notes + (STORE_NOTE,))


def keep(store: VerdictStore | None, key: str | None, verdict: Verdict, attempts: Attempts | None = None) -> Verdict:
    """Store `verdict` (verdicts about the verifier failing are not kept: `VerdictStore.put`), then add the retry
    note; returns what the pool answers."""
    if store is not None and key is not None:
        verdict = store.put(key, verdict)
    return attempts.noted(verdict) if attempts is not None else verdict

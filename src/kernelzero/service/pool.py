"""Verify many candidates: `verify_many(requests)` yields (request, verdict) as each finishes.

The local pool runs `jobs` verifications side by side (each is its own judge and sandboxed worker
processes, so threads here only wait) and answers requests it has seen before from the verdict
store without running anything. Used by `kernelzero eval`; training rewards will use it too.

Not yet here (the scale issue): separate CPU build workers feeding one runner per GPU, the HTTP
front and the Ray backend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from kernelzero.service.store import VerdictStore, request_key
from kernelzero.types import Task, Verdict
from kernelzero.verify import verify
from kernelzero.verify.options import VerifyOptions


@dataclass(frozen=True)
class VerifyRequest:
    """One candidate to verify."""

    task: Task  # the task, sizes applied
    candidate: str  # a completion or a source
    backend: str  # "cuda" or "triton"
    options: VerifyOptions  # verifier options
    tag: object = None  # the caller's handle (e.g. (task name, sample index)), passed back untouched


def device_name(opts: VerifyOptions) -> str:
    """The name verdicts of `opts` will carry: the GPU's, or "cpu"."""
    import torch

    if opts.device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "cpu"


def verify_many(requests: Iterable[VerifyRequest], jobs: int = 2,
                store: VerdictStore | None = None) -> Iterator[tuple[VerifyRequest, Verdict]]:  # fmt: skip
    """Verify every request, `jobs` at a time, in completion order; stored verdicts are reused.

    At most `2 * jobs` requests are in flight, so a long (even endless) iterable of requests
    keeps memory bounded.
    """
    names: dict[VerifyOptions, str] = {}

    def run(req: VerifyRequest) -> Verdict:
        key = None
        if store is not None:
            name = names.setdefault(req.options, device_name(req.options))
            key = request_key(req.task, req.candidate, req.backend, req.options, name)
            hit = store.get(key)
            if hit is not None:
                return replace(hit, notes=hit.notes + ("answered from the verdict store",))
        verdict = verify(req.task, req.candidate, req.backend, req.options)
        return store.put(key, verdict) if store is not None else verdict

    pending: dict[Future, VerifyRequest] = {}
    source = iter(requests)
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        while True:
            while len(pending) < 2 * max(1, jobs):
                req = next(source, None)
                if req is None:
                    break
                pending[pool.submit(run, req)] = req
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()

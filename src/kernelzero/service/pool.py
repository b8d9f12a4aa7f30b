"""Verify many candidates: `verify_many(requests)` yields (request, verdict) as each finishes.

    for req, verdict in verify_many(requests, jobs=2, store=VerdictStore()):   # pool="ray": service/ray_pool.py
        ...

Both pools keep one contract (service/contract.py): stored verdicts are answered without running anything; the
format and static checks run first, so a rejected candidate is never built; a verification whose judge process
died (killed, out of memory) is retried once in a fresh one, then reported `infra_error` (stage `runner`); an
exception while verifying one request becomes that request's verdict (`task_broken` or `infra_error`), so every
request gets a verdict and the stream never ends early because of one sample. Only a request no pool can take (an
unknown backend) raises, when it is drawn from the iterable.

The local pool (the default) has these parts:

- **builds** on the CPU: a candidate of a backend with a build stage (`Backend.build_stage`: CUDA) headed for a GPU
  is first captured in a sandboxed child and its extensions are built into the shared build cache (the backend's
  `build.py`), at most `build_jobs` at a time; the candidate's worker then only loads the library;
- **standby judges** (verify/judge/standby.py), `standby` per GPU (default `per_gpu`), started ahead of requests;
  a pool made with `keep` keeps them ready between runs (`LocalPool.run` again, then `close()`): a trainer verifies
  step after step, and each step's first requests then find warm judges instead of starting them;
- **runners**, one lane per visible GPU, each pinned with `CUDA_VISIBLE_DEVICES`: up to `per_gpu`
  verifications per GPU are in flight: they start, import and check side by side, and take the GPU
  alone only to be timed (verify/judge/lease.py: no sample is timed while another runs on its GPU). Each
  gets 0.9/`per_gpu` of the GPU's memory, so one candidate's allocations cannot make a neighbour run
  out. Requests go to the healthy GPU with the fewest in flight.

Without a GPU there is one lane of `jobs` verifications and no build stage. After a `crash` on a GPU (an illegal
memory access, say) the next sample's judge probes that GPU in a fresh process (verify/judge/lease.py,
verify/judge/probe.py) before using it; a GPU that fails is taken out of the pool (never reset) and the sample goes
to another GPU. `PoolStats` records per-GPU lease time, builds and retries for benchmarks.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelzero.extract import extract_code
from kernelzero.service.contract import (
    Attempts,
    VerifyRequest,
    check_request,
    fault_of,
    from_store,
    guarded,
    keep,
    needs_build,
    rejected,
    retry_once,
    runs_on_gpu,
    store_key,
)
from kernelzero.service.ray_pool import verify_many_ray
from kernelzero.service.slots import GpuSlots
from kernelzero.service.store import VerdictStore
from kernelzero.tasks.hashing import task_hash
from kernelzero.types import Verdict
from kernelzero.verify import VerifyOptions, get_backend, infra_verdict, verify
from kernelzero.verify.backends import backend_module
from kernelzero.verify.backends.cuda.build_cache import BuildCache, default_cache_dir, ensure_readable
from kernelzero.verify.judge.standby import NONE as NO_STANDBY
from kernelzero.verify.judge.standby import Standby
from kernelzero.verify.sandbox.process import plan_for

__all__ = ["LocalPool", "PoolStats", "VerifyRequest", "device_name", "verify_many", "visible_gpus"]


@dataclass
class PoolStats:
    """What a pool did; `summary()` for benchmarks (GPU busy: see there)."""

    started: float = field(default_factory=time.monotonic)
    samples: int = 0
    from_store: int = 0
    builds: int = 0
    build_s: float = 0.0
    retries: int = 0
    probes: list = field(default_factory=list)  # (gpu, passed, message) of health probes after crashes
    unhealthy: set = field(default_factory=set)
    per_gpu: dict = field(default_factory=dict)  # gpu -> {"samples", "lease_s", "excl_s", "wait_s"}
    spans: dict = field(default_factory=dict)  # gpu -> [(start, end)] of leases, epoch seconds
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, gpu: int | None, verdict: Verdict) -> None:
        with self.lock:
            self.samples += 1
            if gpu is None:
                return
            slot = self.per_gpu.setdefault(gpu, {"samples": 0, "lease_s": 0.0, "excl_s": 0.0, "wait_s": 0.0})
            slot["samples"] += 1
            stages = verdict.stage_seconds
            slot["lease_s"] += stages.get("gpu_lease", 0.0)
            slot["excl_s"] += stages.get("gpu_excl", 0.0)
            slot["wait_s"] += stages.get("gpu_wait", 0.0) + stages.get("gpu_excl_wait", 0.0)
            for at, held in (("gpu_lease_at", "gpu_shared"), ("gpu_excl_at", "gpu_excl")):
                if at in stages:
                    self.spans.setdefault(gpu, []).append((stages[at], stages[at] + stages.get(held, 0.0)))

    def summary(self) -> dict:
        """Per GPU, `busy`: share of the wall time during which some sample held the GPU's lease (shared or
        exclusive; overlapping leases count once); `excl`: share during which one sample was being timed."""
        wall = time.monotonic() - self.started
        gpus = {
            g: {
                **v,
                "busy": round(_covered(self.spans.get(g, [])) / wall, 3) if wall else 0.0,
                "excl": round(v["excl_s"] / wall, 3) if wall else 0.0,
            }
            for g, v in sorted(self.per_gpu.items())
        }
        return {
            "wall_s": round(wall, 1),
            "samples": self.samples,
            "from_store": self.from_store,
            "samples_per_hour": round(self.samples * 3600 / wall) if wall else 0,
            "builds": self.builds,
            "build_s": round(self.build_s, 1),
            "retries": self.retries,
            "probes": list(self.probes),
            "unhealthy": sorted(self.unhealthy),
            "gpus": gpus,
        }


def _covered(spans: list[tuple[float, float]]) -> float:
    """Length of the union of intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def device_name(opts: VerifyOptions) -> str:
    """The name verdicts of `opts` will carry: the GPU's, or "cpu"."""
    import torch

    if opts.device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "cpu"


def visible_gpus() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


class LocalPool:
    """Build stage + one lane per GPU (or one CPU lane); see the module docstring."""

    def __init__(
        self,
        jobs: int = 2,
        store: VerdictStore | None = None,
        gpus: list[int] | None = None,
        per_gpu: int = 2,
        build_jobs: int | None = None,
        build_cache: str | None = None,
        stats: PoolStats | None = None,
        standby: int | None = None,
        keep: bool = False,
        serves: int | None = None,
    ):
        self.store = store
        self.keep = keep  # the standby judges outlive each run() until close() (a trainer's pool, step after step)
        self.gpus = visible_gpus() if gpus is None else list(gpus)
        self.per_gpu = max(1, per_gpu)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
        self.build_jobs = build_jobs or max(1, (cpus - 2 * len(self.gpus)) // 2)
        self.cache = None  # the shared build cache (with GPUs)
        self.stats = stats or PoolStats()
        self.jobs = max(1, jobs)
        self.slots = self.build_jobs + len(self.gpus) * self.per_gpu if self.gpus else self.jobs
        self.builds = threading.Semaphore(self.build_jobs)
        self.gpu_slots = GpuSlots(self.gpus, self.per_gpu, self.stats.unhealthy)  # service/slots.py
        self.names: dict[VerifyOptions, str] = {}
        # judges started ahead of requests, per lane (verify/judge/standby.py); default: one per GPU slot
        count = self.per_gpu if standby is None and self.gpus else standby or 0
        self.standby = Standby(count, serves)  # `serves`: requests each serves (None: KZ_STANDBY_SERVES, else 8)
        if self.gpus:  # make the build cache now, before threads start
            self.cache = BuildCache(ensure_readable(Path(build_cache) if build_cache else default_cache_dir()))

    # -- stages ----------------------------------------------------------------------------------
    def _build(self, req: VerifyRequest) -> None:
        """Build a candidate's extensions into the shared cache (bounded by `build_jobs`): the backend's build stage."""
        build = backend_module(get_backend(req.backend), "build")
        with self.builds:
            start = time.monotonic()
            results = build.prebuild(
                extract_code(req.candidate),
                self.cache,
                timeout_s=req.options.build_timeout_s,
                sandbox=plan_for(req.options),
            )
            with self.stats.lock:
                self.stats.builds += sum(1 for r in results if not r.cached)
                self.stats.build_s += time.monotonic() - start

    def _verify(self, req: VerifyRequest, gpu: int | None) -> tuple[Verdict, Attempts]:
        """Verify on `gpu` (or the CPU) under the retry-once rule: (verdict, attempts), see service/contract.py."""
        opts = req.options
        if gpu is not None:
            share = min(opts.gpu_mem_fraction, round(0.9 / self.per_gpu, 3))  # samples in flight share the GPU
            opts = replace(opts, gpu_index=gpu, build_cache=str(self.cache.root), gpu_mem_fraction=share)

        def attempt(fresh: bool) -> Verdict:  # the retry gets a fresh judge, never a standby one
            standby = NO_STANDBY if fresh else self.standby
            return guarded(req, lambda: verify(req.task, req.candidate, req.backend, opts, standby=standby))

        def counted() -> None:
            with self.stats.lock:
                self.stats.retries += 1

        verdict, attempts = retry_once(req, attempt, counted)
        if gpu is not None:
            verdict = replace(verdict, notes=verdict.notes + (f"gpu={gpu}",))
        return verdict, attempts

    def _on_a_gpu(self, req: VerifyRequest) -> tuple[Verdict, Attempts | None, int | None]:
        """Verify on the healthy GPU with the fewest in flight; a GPU that fails its health probe is taken out and
        the request goes to another. (verdict, attempts, gpu); gpu None when no healthy GPU is left."""
        group = (task_hash(req.task), req.options)  # one task under one set of options (service/slots.py)
        while True:
            gpu = self.gpu_slots.take(group)
            if gpu is None:
                message = f"no healthy GPU left in the pool (failed health probes: {sorted(self.stats.unhealthy)})"
                source = extract_code(req.candidate)
                fault = infra_verdict(req.task, source, req.backend, req.options, "runner", message)
                return fault, None, None
            try:
                verdict, attempts = self._verify(req, gpu)
            finally:
                self.gpu_slots.give(gpu, group)
            if verdict.stage != "gpu_health":
                return verdict, attempts, gpu
            with self.stats.lock:  # that GPU is out; try the request on another
                self.stats.unhealthy.add(gpu)
                self.stats.probes.append((gpu, False, verdict.message))
            self.gpu_slots.out(gpu)

    def run_one(self, req: VerifyRequest) -> Verdict:
        """One request's verdict; whatever raises on its way (the store, a build) becomes its verdict
        (`verify.verdicts.fault_verdict`), so one request never ends the stream."""
        try:
            return self._run_one(req)
        except Exception as exc:
            return fault_of(req, exc)

    def _run_one(self, req: VerifyRequest) -> Verdict:
        """One request: the store, the pre-checks, the build stage, then a GPU lane (or the CPU lane)."""
        key = None
        if self.store is not None:
            key = store_key(req, self.names.setdefault(req.options, device_name(req.options)))
            hit = from_store(self.store, key)
            if hit is not None:
                with self.stats.lock:
                    self.stats.from_store += 1
                return hit
        verdict = rejected(req)  # before any build: a rejected candidate costs no build and no GPU slot
        if verdict is not None:
            self.stats.record(None, verdict)
            return keep(self.store, key, verdict)
        on_gpu = runs_on_gpu(req, bool(self.gpus))
        if needs_build(req, bool(self.gpus)):
            self._build(req)
        if not on_gpu:
            verdict, attempts = self._verify(req, None)
            gpu = None
        else:
            verdict, attempts, gpu = self._on_a_gpu(req)
        if any("health probe" in n for n in verdict.notes):
            with self.stats.lock:
                self.stats.probes.append((gpu, True, ""))
        self.stats.record(gpu, verdict)
        return keep(self.store, key, verdict, attempts)

    def run(self, requests: Iterable[VerifyRequest]) -> Iterator[tuple[VerifyRequest, Verdict]]:
        """Every request's verdict in completion order; the standby judges end with the run unless the pool was made
        with `keep` (then `close()` ends them)."""
        try:
            yield from self._run(iter(requests))
        finally:
            if not self.keep:
                self.standby.close()

    def close(self) -> None:
        """End the standby judges (none has a request); a kept pool's owner calls this once it verifies no more."""
        self.standby.close()

    def _run(self, source: Iterator[VerifyRequest]) -> Iterator[tuple[VerifyRequest, Verdict]]:
        pending: dict[Future, VerifyRequest] = {}
        with ThreadPoolExecutor(self.slots) as executor:
            while True:
                while len(pending) < 2 * self.slots:
                    req = next(source, None)
                    if req is None:
                        break
                    check_request(req)  # an unknown backend is the caller's error: it raises here
                    plan_for(req.options)  # so is a sandbox that cannot be set up (SandboxUnavailable): nothing runs
                    pending[executor.submit(self.run_one, req)] = req
                if not pending:
                    return
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future), future.result()


def verify_many(
    requests: Iterable[VerifyRequest],
    jobs: int = 2,
    store: VerdictStore | None = None,
    *,
    gpus: list[int] | None = None,
    per_gpu: int = 2,
    build_jobs: int | None = None,
    build_cache: str | None = None,
    pool: str = "local",
    stats: PoolStats | None = None,
    ray_address: str | None = None,
    standby: int | None = None,
    serves: int | None = None,
) -> Iterator[tuple[VerifyRequest, Verdict]]:
    """Verify every request in completion order; stored verdicts are reused.

    Without a GPU, `jobs` verifications run side by side; with GPUs, `per_gpu` per GPU plus
    `build_jobs` builds. At most twice that many requests are in flight, so a long (even endless)
    iterable keeps memory bounded.
    """
    if pool == "ray":
        return verify_many_ray(requests, store=store, address=ray_address, build_jobs=build_jobs)
    if pool != "local":
        raise ValueError(f"unknown pool {pool!r}; choose local or ray")
    return LocalPool(jobs, store, gpus, per_gpu, build_jobs, build_cache, stats, standby, serves=serves).run(requests)

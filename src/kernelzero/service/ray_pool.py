"""Verify many candidates on a Ray cluster: one runner actor per GPU, builds on CPU workers.

    for req, verdict in verify_many_ray(requests, store=VerdictStore(), address="auto"):
        ...

The same contract as the local pool (`kernelzero.service.pool.verify_many`, pool="ray" comes here), kept in one
place, service/contract.py: (request, verdict) pairs in completion order, at most `in_flight` requests taken from
the iterable at a time (so an endless iterable keeps memory bounded), the format and static checks run here, in
the driver, before anything is built or sent to a runner, verdicts looked up in and written to the verdict store
as the local pool does (an answer from the store carries the note "answered from the verdict store"), and the
retry-once rule. `RayScheduler` does the scheduling, one short method per step.

Layout on the cluster (`plan_layout`):

- runners: one `VerifyRunner` actor per GPU (`num_gpus=1`, so Ray sets CUDA_VISIBLE_DEVICES for
  it, and `num_cpus=1` held for its lifetime, for its judge and worker processes), each given one
  request at a time, since it times kernels and two on one GPU would skew the timings. A cluster
  without GPUs gets `runners` CPU runner actors (default 1, `num_cpus=1`).
- builds: with GPU runners, a request of a backend with a build stage (`Backend.build_stage`: CUDA) bound for a
  GPU first goes to a CPU task (`num_cpus=1`, on any node with a free CPU) that runs the backend's
  `build.prebuild_artifacts`; the runner installs what it built into its own temporary folder and verifies with
  `build_cache` pointing there, so a GPU spends its time running kernels, not compiling. A build
  step that fails only means the runner builds itself.
- faults: a runner actor that dies during a request (RayActorError: killed, out of host memory,
  a crashed node) is replaced, and the request retried once; so is a request whose judge process
  died inside a healthy actor (a `crash` at stage "judge"), as the local pool does. A second death
  gives an `infra_error` verdict at stage "runner", never stored; a retried verdict carries the note "retried
  once: the first runner died (...)". What verify() raises for one request is that request's verdict (`fault_of`).

Store keys use each runner's GPU name (a runner's verdicts carry its own device), so a cluster of
mixed GPUs keys each verdict by the GPU that produced it. When the runners' library versions (or
verifier code) differ from this process's, the store is not used, since its keys would describe
the wrong environment.

`address=None` follows Ray's own rule: RAY_ADDRESS, else a cluster started with `ray start` on this
machine, else a new local instance. Ray is started (and shut down at the end) only when it is not
initialised already; actors are created per call and killed at the end. Every node needs this
kernelzero installed (the actors import it).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from kernelzero.extract import extract_code
from kernelzero.service.contract import (
    Attempts,
    VerifyRequest,
    check_request,
    fault_of,
    from_store,
    guarded,
    judge_died,
    keep,
    needs_build,
    rejected,
    store_key,
)
from kernelzero.service.store import VerdictStore, library_versions
from kernelzero.types import Task, Verdict
from kernelzero.verify import VerifyOptions, get_backend, verify
from kernelzero.verify.backends import backend_module
from kernelzero.verify.backends.cuda.build_cache import install_artifacts

log = logging.getLogger(__name__)

ACTOR_DIED = "its Ray actor process died"  # why an attempt died when its runner actor did


class VerifyRunner:
    """A Ray actor (see `verify_many_ray`) that verifies one request at a time in its own process."""

    def __init__(self) -> None:
        self._cache_dir: str | None = None  # made on the first request with prebuilt artifacts

    def identity(self, gpu: bool = True, versions: bool = True) -> tuple[str | None, dict[str, str]]:
        """(this runner's GPU name or None, its library versions or {}) for store keys; answers once started."""
        name = None
        if gpu:
            import torch

            name = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        return name, library_versions() if versions else {}

    def verify(
        self, task: Task, candidate: str, backend: str, options: VerifyOptions, artifacts: dict | None = None
    ) -> Verdict:
        """The request's verdict (what verify() raises reaches the driver, which makes it the verdict)."""
        if not artifacts:
            return verify(task, candidate, backend, options)
        if self._cache_dir is None:
            self._cache_dir = tempfile.mkdtemp(prefix="kz-runner-cache-")
        try:
            install_artifacts(artifacts, self._cache_dir)
        except Exception:  # the verifier then builds itself; the verdict is the same
            log.warning("could not install prebuilt artifacts; the runner builds itself", exc_info=True)
            return verify(task, candidate, backend, options)
        try:
            return verify(task, candidate, backend, replace(options, build_cache=self._cache_dir))
        finally:  # one request's libraries at a time: the folder never grows
            shutil.rmtree(self._cache_dir, ignore_errors=True)
            os.makedirs(self._cache_dir, exist_ok=True)


def build_artifacts(candidate: str, backend: str, options: VerifyOptions) -> tuple[bool, dict | None]:
    """A CPU task, the backend's build stage: (built, artifacts); (False, None) when nothing was built.

    The scheduler sends only requests the pre-checks let through (`contract.rejected`) and that need a build
    (`contract.needs_build`).
    """
    build = backend_module(get_backend(backend), "build")
    try:
        artifacts = build.prebuild_artifacts(extract_code(candidate), options.build_timeout_s)
    except Exception:  # the runner's own build reports the failure in the verdict
        log.warning("prebuild failed; the runner builds itself", exc_info=True)
        return False, None
    return bool(artifacts), artifacts or None


@dataclass(frozen=True)
class Layout:
    """Where a call's work runs on the cluster (`plan_layout`)."""

    on_gpu: bool  # the runners hold a GPU each
    runners: int  # runner actors
    in_flight: int  # requests taken from the iterable and not yet answered
    build_cap: int  # build tasks at once
    can_build: bool  # a CPU is left over for build tasks


def plan_layout(
    resources: dict, runners: int | None = None, build_jobs: int | None = None, in_flight: int | None = None
) -> Layout:
    """The layout for a cluster of `resources` (`ray.cluster_resources()`); arguments as in `verify_many_ray`."""
    gpus = int(resources.get("GPU", 0))
    cpus = int(resources.get("CPU", 1))
    on_gpu = gpus > 0
    count = (min(runners, gpus) if runners else gpus) if on_gpu else runners or 1
    count = max(1, min(count, cpus))  # each runner holds a CPU: one Ray cannot place would be waited for forever
    if in_flight is None:
        in_flight = max(2 * count, cpus) if on_gpu else 2 * count
    in_flight = max(in_flight, count)
    return Layout(on_gpu, count, in_flight, build_jobs or in_flight, on_gpu and cpus > count)


@dataclass(eq=False)
class _Item:
    req: VerifyRequest
    key: str | None = None
    key_device: str | None = None  # the device `key` was made for (and looked up with)
    artifacts: object = None  # an ObjectRef of prebuilt artifacts, or None
    attempts: Attempts = field(default_factory=Attempts)  # its runners' deaths so far
    verdict: Verdict | None = None  # the pre-checks' verdict, waiting for a runner's device to key it


@dataclass(eq=False)
class _Slot:
    actor: object
    gpu: str | None = None
    ready: bool = False  # identity known and no request running
    identity_ref: object = None  # pending identity() of a new actor


class RayScheduler:
    """One `verify_many_ray` call's scheduler: runner actors, build tasks, and the requests between them.

    A request moves: admitted (store, pre-checks) -> `to_build` -> `building` -> `ready` -> `running` -> answered;
    a request whose runner died goes back to the front of `ready` once (service/contract.py: the retry-once rule).
    `ray` is the Ray module (or a stand-in with the same calls, in tests).
    """

    def __init__(self, ray, layout: Layout, store: VerdictStore | None = None):
        self.ray, self.layout, self.store = ray, layout, store
        self.versions = library_versions() if store is not None else {}
        self.runner_cls = ray.remote(VerifyRunner).options(num_cpus=1, num_gpus=1 if layout.on_gpu else 0)
        self.build_task = ray.remote(build_artifacts).options(num_cpus=1, num_returns=2)
        self.slots: list[_Slot] = []
        self.to_build: deque[_Item] = deque()
        self.building: dict = {}  # build flag ObjectRef -> _Item
        self.ready: deque[_Item] = deque()
        self.running: dict = {}  # verify ObjectRef -> (_Item, _Slot)
        self.replacing: dict = {}  # identity ObjectRef -> _Slot
        self.source: Iterator[VerifyRequest] = iter(())
        self.exhausted = False

    # -- runners -------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the runners and wait until each knows its device."""
        self.slots.extend(self._new_slot() for _ in range(self.layout.runners))
        for slot in self.slots:
            self._started(slot, self.ray.get(slot.identity_ref))

    def _new_slot(self) -> _Slot:
        actor = self.runner_cls.remote()
        return _Slot(actor, identity_ref=actor.identity.remote(self.layout.on_gpu, self.store is not None))

    def _started(self, slot: _Slot, identity: tuple) -> None:
        slot.gpu, theirs = identity
        slot.identity_ref, slot.ready = None, True
        if self.store is not None and theirs != self.versions:
            log.warning(
                "a runner's library versions %s differ from this process's %s: not using the verdict store",
                theirs,
                self.versions,
            )
            self.store = None

    def _replace(self, slot: _Slot, item: _Item, exc: Exception) -> None:
        """Kill a dead runner's actor and start another in its slot."""
        log.warning("a runner died verifying %s (%s); starting another", item.req.task.name, type(exc).__name__)
        self.ray.kill(slot.actor, no_restart=True)
        fresh = self._new_slot()
        slot.actor, slot.identity_ref, slot.ready = fresh.actor, fresh.identity_ref, False
        self.replacing[slot.identity_ref] = slot

    def _device(self, slot: _Slot, opts: VerifyOptions) -> str:
        return slot.gpu if slot.gpu and opts.device != "cpu" else "cpu"

    # -- the store -----------------------------------------------------------------------------------------------
    def _lookup(self, item: _Item, device: str) -> Verdict | None:
        """Key `item` for `device`; a stored verdict if there is one (looked up once per device)."""
        if self.store is None or item.key_device == device:
            return None
        item.key, item.key_device = store_key(item.req, device), device
        return from_store(self.store, item.key)

    def _answer(self, item: _Item, verdict: Verdict) -> tuple[VerifyRequest, Verdict]:
        return item.req, keep(self.store, item.key, verdict, item.attempts)

    # -- requests in -----------------------------------------------------------------------------------------------
    def _admit(self) -> Iterator[tuple[VerifyRequest, Verdict]]:
        """Take requests while fewer than `in_flight` are under way; yield those answered at once."""
        while not self.exhausted:
            under_way = len(self.to_build) + len(self.building) + len(self.ready) + len(self.running)
            if under_way >= self.layout.in_flight:
                return
            req = next(self.source, None)
            if req is None:
                self.exhausted = True
                return
            check_request(req)  # an unknown backend is the caller's error: it raises here
            yield from self._route(_Item(req))

    def _route(self, item: _Item) -> Iterator[tuple[VerifyRequest, Verdict]]:
        """The store (when every runner would key it alike), the pre-checks, then the build or the runners' queue."""
        opts = item.req.options
        devices = {self._device(s, opts) for s in self.slots if s.identity_ref is None}
        hit = self._lookup(item, devices.pop()) if len(devices) == 1 else None
        if hit is not None:
            yield item.req, hit
            return
        item.verdict = guarded(item.req, lambda: rejected(item.req))  # before any build: a rejected one isn't built
        if item.verdict is not None and (self.store is None or item.key is not None):
            yield self._answer(item, item.verdict)
        elif item.verdict is None and self.layout.can_build and needs_build(item.req, self.layout.on_gpu):
            self.to_build.append(item)
        else:
            self.ready.append(item)  # a rejected one waits only for a runner's device, for its store key

    def _start_builds(self) -> None:
        while self.to_build and len(self.building) < self.layout.build_cap:
            item = self.to_build.popleft()
            req = item.req
            flag, item.artifacts = self.build_task.remote(req.candidate, req.backend, req.options)
            self.building[flag] = item

    def _dispatch(self) -> Iterator[tuple[VerifyRequest, Verdict]]:
        """Give each free runner the next ready request; answer those the store or the pre-checks decide."""
        for slot in self.slots:
            while slot.ready and self.ready:
                item = self.ready.popleft()
                hit = self._lookup(item, self._device(slot, item.req.options))
                if hit is not None:
                    yield item.req, hit
                elif item.verdict is not None:
                    yield self._answer(item, item.verdict)
                else:
                    req = item.req
                    ref = slot.actor.verify.remote(req.task, req.candidate, req.backend, req.options, item.artifacts)
                    slot.ready = False
                    self.running[ref] = (item, slot)

    # -- results in ------------------------------------------------------------------------------------------------
    def _wait(self, waiting: list) -> list:
        """The refs that are done: at least one, and every other one done by then."""
        done, _ = self.ray.wait(waiting, num_returns=1)
        if len(waiting) > 1:
            done, _ = self.ray.wait(waiting, num_returns=len(waiting), timeout=0)
        return done

    def _settle(self, ref) -> Iterator[tuple[VerifyRequest, Verdict]]:
        if ref in self.building:
            self._built(ref)
        elif ref in self.replacing:
            self._started(self.replacing.pop(ref), self.ray.get(ref))  # a runner that cannot even start: raise
        else:
            yield from self._verified(ref)

    def _built(self, ref) -> None:
        item = self.building.pop(ref)
        try:
            built = self.ray.get(ref)
        except Exception:  # the build task's worker died: the runner builds itself
            built = False
        if not built:
            item.artifacts = None
        self.ready.append(item)

    def _verified(self, ref) -> Iterator[tuple[VerifyRequest, Verdict]]:
        """A runner's answer; its judge's or its actor's death counts against the request's one retry."""
        item, slot = self.running.pop(ref)
        verdict, died = None, ""
        try:
            verdict = self.ray.get(ref)
            died = verdict.message if judge_died(verdict) else ""
            slot.ready = True
        except self.ray.exceptions.RayActorError as exc:
            died = ACTOR_DIED
            self._replace(slot, item, exc)
        except Exception as exc:  # verify() raised in a live actor: the request's verdict (RayTaskError.cause)
            verdict, slot.ready = fault_of(item.req, getattr(exc, "cause", None) or exc), True
        if not died:
            yield self._answer(item, verdict)
        elif item.attempts.died(died):
            self.ready.appendleft(item)  # retried next, on the first free runner
        else:
            yield item.req, item.attempts.give_up(item.req, verdict, self._device(slot, item.req.options))

    # -- the loop --------------------------------------------------------------------------------------------------
    def run(self, requests: Iterable[VerifyRequest]) -> Iterator[tuple[VerifyRequest, Verdict]]:
        """(request, verdict) pairs in completion order; call `close()` afterwards."""
        self.source = iter(requests)
        self.start()
        while True:
            yield from self._admit()
            self._start_builds()
            yield from self._dispatch()
            waiting = [*self.building, *self.running, *self.replacing]
            if not waiting:
                if self.exhausted and not self.ready and not self.to_build:
                    return
                continue
            for ref in self._wait(waiting):
                yield from self._settle(ref)

    def close(self) -> None:
        """Cancel the builds under way and kill the runners."""
        for ref in self.building:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:
                pass
        for slot in self.slots:
            try:
                self.ray.kill(slot.actor, no_restart=True)
            except Exception:
                pass


def verify_many_ray(
    requests: Iterable[VerifyRequest],
    *,
    store: VerdictStore | None = None,
    address: str | None = None,
    runners: int | None = None,
    build_jobs: int | None = None,
    in_flight: int | None = None,
) -> Iterator[tuple[VerifyRequest, Verdict]]:
    """Verify every request on Ray, in completion order; stored verdicts are reused (see the module doc).

    runners: CPU runners when the cluster has no GPU (default 1); with GPUs, at most this many GPU
    runners (default one per GPU); never more than the cluster's CPUs. build_jobs: builds at
    once (default: as many as are in flight). in_flight: requests taken from `requests` and not yet
    answered (default twice the runners; with GPU runners at least the cluster's CPUs, so builds on
    the CPUs the runners leave free keep up).
    """
    try:
        import ray  # optional: the extra `ray`
    except ImportError as exc:
        raise RuntimeError(f"the Ray backend needs ray ({exc}); pip install 'kernelzero[ray]'") from None
    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        started = True
    scheduler = None
    try:
        scheduler = RayScheduler(ray, plan_layout(ray.cluster_resources(), runners, build_jobs, in_flight), store)
        yield from scheduler.run(requests)
    finally:
        if scheduler is not None:
            scheduler.close()
        if started:
            ray.shutdown()

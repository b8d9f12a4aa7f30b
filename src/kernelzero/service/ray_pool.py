"""Verify many candidates on a Ray cluster: one runner actor per GPU, CUDA builds on CPU workers.

    for req, verdict in verify_many_ray(requests, store=VerdictStore(), address="auto"):
        ...

The same contract as `kernelzero.service.pool.verify_many`: (request, verdict) pairs in completion
order, at most `in_flight` requests taken from the iterable at a time (so an endless iterable keeps
memory bounded), and verdicts looked up in and written to the verdict store exactly as the local
pool does (an answer from the store carries the note "answered from the verdict store").

Layout on the cluster:

- runners: one `VerifyRunner` actor per GPU (`num_gpus=1`, so Ray sets CUDA_VISIBLE_DEVICES for
  it, and `num_cpus=1` held for its lifetime, for its judge and worker processes), each given one
  request at a time, since it times kernels and two on one GPU would skew the timings. A cluster
  without GPUs gets `runners` CPU runner actors (default 1, `num_cpus=1`).
- builds: with GPU runners, a CUDA request first goes to a CPU task (`num_cpus=1`, on any node
  with a free CPU) that runs `kernelzero.verify.cuda_build.prebuild_artifacts`, unless the
  verifier's format or static checks reject the candidate anyway; the
  runner installs what it built into its own temporary folder and verifies with
  `build_cache` pointing there, so a GPU spends its time running kernels, not compiling. A build
  step that fails only means the runner builds itself.
- faults: a runner actor that dies during a request (RayActorError: killed, out of host memory,
  a crashed node) is replaced, and the request retried once; so is a request whose judge process
  died inside a healthy actor (a `crash` at stage "judge"), as the local pool does. A second death
  gives a `crash` verdict at stage "runner", which is not put in the store (the death may not be
  the candidate's); a retried verdict carries the note "retried once: the first runner died (...)".

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

from kernelzero.service.pool import VerifyRequest
from kernelzero.service.store import VerdictStore, library_versions, request_key
from kernelzero.types import Verdict
from kernelzero.verify.options import VerifyOptions

log = logging.getLogger(__name__)

RETRIED = "retried once: the first runner died"  # the note, as the local pool words it


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
        self, task, candidate: str, backend: str, options: VerifyOptions, artifacts: dict | None = None
    ) -> Verdict:
        from kernelzero.verify import verify

        if not artifacts:
            return verify(task, candidate, backend, options)
        if self._cache_dir is None:
            self._cache_dir = tempfile.mkdtemp(prefix="kz-runner-cache-")
        try:
            from kernelzero.verify.build_cache import install_artifacts

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
    """A CPU task: (built, artifacts) for a CUDA candidate; (False, None) when there is nothing to build.

    Candidates the verifier rejects before building (format, static checks) are not built.
    """
    from kernelzero.verify import format_problem
    from kernelzero.verify.cuda_build import prebuild_artifacts
    from kernelzero.verify.extract import extract_code

    source = extract_code(candidate)
    if format_problem(source):
        return False, None
    if options.static_checks:
        from kernelzero.verify.static import check_candidate

        if check_candidate(source, backend):
            return False, None
    try:
        artifacts = prebuild_artifacts(source, options.build_timeout_s)
    except Exception:  # the runner's own build reports the failure in the verdict
        log.warning("prebuild failed; the runner builds itself", exc_info=True)
        return False, None
    return bool(artifacts), artifacts or None


@dataclass(eq=False)
class _Item:
    req: VerifyRequest
    key: str | None = None
    key_device: str | None = None  # the device `key` was made for (and looked up with)
    artifacts: object = None  # an ObjectRef of prebuilt artifacts, or None
    deaths: list = field(default_factory=list)  # why its runners died so far


@dataclass(eq=False)
class _Slot:
    actor: object
    gpu: str | None = None
    ready: bool = False  # identity known and no request running
    identity_ref: object = None  # pending identity() of a new actor


def _judge_died(verdict: Verdict) -> bool:
    """The verifier's judge process died (killed, out of memory): the local pool retries these too."""
    return verdict.status == "crash" and verdict.stage == "judge"


def _crash(req: VerifyRequest, device: str, message: str) -> Verdict:
    from kernelzero.verify import _early
    from kernelzero.verify.extract import extract_code

    return _early(
        req.task, extract_code(req.candidate), req.backend, req.options, "crash", "runner", message, device=device
    )


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
    runners (default one per GPU); never more than the cluster's CPUs. build_jobs: CUDA prebuilds at
    once (default: as many as are in flight). in_flight: requests taken from `requests` and not yet
    answered (default twice the runners; with GPU runners at least the cluster's CPUs, so builds on
    the CPUs the runners leave free keep up).
    """
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(f"the Ray backend needs ray ({exc}); pip install 'kernelzero[ray]'") from None
    from ray.exceptions import RayActorError

    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        started = True
    slots: list[_Slot] = []
    building: dict = {}  # flag ObjectRef -> _Item
    try:
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        on_gpu = gpus > 0
        cpus = int(resources.get("CPU", 1))
        count = (min(runners, gpus) if runners else gpus) if on_gpu else runners or 1
        count = max(1, min(count, cpus))  # each runner holds a CPU: one Ray cannot place would be waited for forever
        runner_cls = ray.remote(VerifyRunner).options(num_cpus=1, num_gpus=1 if on_gpu else 0)
        build_task = ray.remote(build_artifacts).options(num_cpus=1, num_returns=2)
        if in_flight is None:
            in_flight = max(2 * count, cpus) if on_gpu else 2 * count
        in_flight = max(in_flight, count)
        build_cap = build_jobs or in_flight
        can_build = on_gpu and cpus > count  # builds need a CPU no runner holds

        versions = library_versions() if store is not None else {}

        def new_slot() -> _Slot:
            actor = runner_cls.remote()
            return _Slot(actor, identity_ref=actor.identity.remote(on_gpu, store is not None))

        def started_slot(slot: _Slot, identity: tuple) -> None:
            nonlocal store
            slot.gpu, theirs = identity
            slot.identity_ref, slot.ready = None, True
            if store is not None and theirs != versions:
                log.warning(
                    "a runner's library versions %s differ from this process's %s: not using the verdict store",
                    theirs,
                    versions,
                )
                store = None

        slots.extend(new_slot() for _ in range(count))
        for slot in slots:
            started_slot(slot, ray.get(slot.identity_ref))

        def device_of(slot: _Slot, opts: VerifyOptions) -> str:
            return slot.gpu if slot.gpu and opts.device != "cpu" else "cpu"

        def lookup(item: _Item, device: str) -> Verdict | None:
            """Key `item` for `device`; a stored verdict if there is one (looked up once per device)."""
            if store is None or item.key_device == device:
                return None
            req = item.req
            item.key = request_key(req.task, req.candidate, req.backend, req.options, device)
            item.key_device = device
            hit = store.get(item.key)
            return None if hit is None else replace(hit, notes=hit.notes + ("answered from the verdict store",))

        def finished(item: _Item, verdict: Verdict) -> Verdict:
            if store is not None:
                verdict = store.put(item.key, verdict)
            if item.deaths:
                verdict = replace(verdict, notes=verdict.notes + (f"{RETRIED} ({item.deaths[0]})",))
            return verdict

        to_build: deque[_Item] = deque()
        ready: deque[_Item] = deque()
        running: dict = {}  # verify ObjectRef -> (_Item, _Slot)
        replacing: dict = {}  # identity ObjectRef -> _Slot
        source = iter(requests)
        exhausted = False
        while True:
            while not exhausted and len(to_build) + len(building) + len(ready) + len(running) < in_flight:
                req = next(source, None)
                if req is None:
                    exhausted = True
                    break
                item = _Item(req)
                devices = {device_of(s, req.options) for s in slots if s.identity_ref is None}
                if len(devices) == 1:  # every runner would key it alike: ask the store before building
                    hit = lookup(item, devices.pop())
                    if hit is not None:
                        yield req, hit
                        continue
                (to_build if can_build and req.backend == "cuda" else ready).append(item)
            while to_build and len(building) < build_cap:
                item = to_build.popleft()
                flag, item.artifacts = build_task.remote(item.req.candidate, item.req.backend, item.req.options)
                building[flag] = item
            for slot in slots:
                while slot.ready and ready:
                    item = ready.popleft()
                    hit = lookup(item, device_of(slot, item.req.options))
                    if hit is not None:
                        yield item.req, hit
                        continue
                    req = item.req
                    ref = slot.actor.verify.remote(req.task, req.candidate, req.backend, req.options, item.artifacts)
                    slot.ready = False
                    running[ref] = (item, slot)
            waiting = [*building, *running, *replacing]
            if not waiting:
                if exhausted and not ready and not to_build:
                    return
                continue
            done, _ = ray.wait(waiting, num_returns=1)
            done, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0) if len(waiting) > 1 else (done, None)
            for ref in done:
                if ref in building:
                    item = building.pop(ref)
                    try:
                        built = ray.get(ref)
                    except Exception:  # the build task's worker died: the runner builds itself
                        built = False
                    if not built:
                        item.artifacts = None
                    ready.append(item)
                elif ref in replacing:
                    started_slot(replacing.pop(ref), ray.get(ref))  # a runner that cannot even start: raise
                else:
                    item, slot = running.pop(ref)
                    verdict = None
                    try:
                        verdict = ray.get(ref)
                        died = verdict.message if _judge_died(verdict) else ""
                        slot.ready = True
                    except RayActorError as exc:
                        died = "its Ray actor process died"
                        log.warning(
                            "a runner died verifying %s (%s); starting another", item.req.task.name, type(exc).__name__
                        )
                        ray.kill(slot.actor, no_restart=True)
                        fresh = new_slot()
                        slot.actor, slot.identity_ref, slot.ready = fresh.actor, fresh.identity_ref, False
                        replacing[slot.identity_ref] = slot
                    if not died:
                        yield item.req, finished(item, verdict)
                        continue
                    item.deaths.append(died)
                    if len(item.deaths) < 2:
                        ready.appendleft(item)  # retried next, on the first free runner
                        continue
                    message = f"the runner died twice ({item.deaths[0]}; {item.deaths[1]})"
                    if verdict is not None:
                        yield item.req, replace(verdict, stage="runner", message=message)
                    else:
                        yield item.req, _crash(item.req, device_of(slot, item.req.options), message)
    finally:
        for ref in building:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        for slot in slots:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:
                pass
        if started:
            ray.shutdown()

"""The contract both pools keep (service/contract.py): pre-checks before any build, the build decision, the
retry-once rule and the store's notes. Fast: no judge process starts and no Ray instance (a stand-in records what
the Ray scheduler would submit)."""

from dataclasses import replace
from pathlib import Path

import pytest

from kernelzero.service.contract import (
    RETRIED,
    STORE_NOTE,
    Attempts,
    VerifyRequest,
    from_store,
    keep,
    needs_build,
    retry_once,
    store_key,
)
from kernelzero.service.pool import LocalPool
from kernelzero.service.ray_pool import Layout, RayScheduler, plan_layout
from kernelzero.service.store import VerdictStore
from kernelzero.tasks import load_suite, resize, select
from kernelzero.types import Verdict
from kernelzero.verify import get_backend, options_for
from kernelzero.verify.backends import backend_module

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
THREADED = (KERNELS / "cheat" / "cuda_std_thread.py").read_text()  # static_violation: std::thread in CUDA source
RELU = (KERNELS / "correct" / "cuda_relu.py").read_text()  # passes the static checks


@pytest.fixture(scope="module")
def task():
    return resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")


def _verdict(status="correct", stage="done", message="") -> Verdict:
    return Verdict(
        status=status,
        task="t",
        task_hash="h",
        candidate_hash="c",
        backend="cuda",
        profile="default",
        device="cpu",
        stage=stage,
        message=message,
    )


def _died(why: str) -> Verdict:
    return _verdict("crash", "judge", why)


# -- the build decision --------------------------------------------------------------------------------------------


def test_only_gpu_bound_requests_of_a_backend_with_a_build_stage_are_built(task):
    cuda = VerifyRequest(task, RELU, "cuda", options_for())
    assert get_backend("cuda").build_stage and not get_backend("triton").build_stage
    assert needs_build(cuda, gpus=True)
    assert not needs_build(cuda, gpus=False)  # no GPU in the pool
    assert not needs_build(replace(cuda, options=options_for(device="cpu")), gpus=True)  # asked for the CPU
    assert not needs_build(replace(cuda, backend="triton"), gpus=True)
    with pytest.raises(ValueError, match="unknown backend 'tilelang'"):
        needs_build(replace(cuda, backend="tilelang"), gpus=True)


class _Built(Exception):
    """Raised by the stand-in build stage: the request got as far as the build."""


def test_a_static_violation_is_never_built_in_the_local_pool(task, tmp_path, monkeypatch):
    builds = []

    def prebuild(source, cache, **kwargs):
        builds.append(source)
        raise _Built

    monkeypatch.setattr(backend_module(get_backend("cuda"), "build"), "prebuild", prebuild)
    pool = LocalPool(gpus=[0], per_gpu=1, build_jobs=1, build_cache=str(tmp_path), standby=0)
    verdict = pool.run_one(VerifyRequest(task, THREADED, "cuda", options_for()))
    assert verdict.status == "static_violation" and "std::thread" in verdict.message
    assert builds == []  # the build stage was never entered
    assert pool.gpu_slots.in_flight == {0: 0} and pool.stats.per_gpu == {}  # nor a GPU lane taken
    # a candidate the checks let through does reach the build stage (whose exception becomes its verdict)
    verdict = pool.run_one(VerifyRequest(task, RELU, "cuda", options_for()))
    assert (verdict.status, verdict.stage) == ("infra_error", "exception") and "_Built" in verdict.message
    assert len(builds) == 1


class _Ray:
    """Stands in for the Ray module: records the tasks submitted; nothing runs."""

    def __init__(self):
        self.submitted = []

    def remote(self, fn):
        return _Remote(self, fn.__name__)


class _Remote:
    def __init__(self, ray: _Ray, name: str):
        self.ray, self.name = ray, name

    def options(self, **_):
        return self

    def remote(self, *args):
        self.ray.submitted.append((self.name, args))
        return object(), object()


def test_a_static_violation_is_never_built_in_the_ray_pool(task):
    ray = _Ray()
    layout = Layout(on_gpu=True, runners=1, in_flight=8, build_cap=8, can_build=True)
    scheduler = RayScheduler(ray, layout)
    requests = [
        VerifyRequest(task, THREADED, "cuda", options_for(), tag="rejected"),
        VerifyRequest(task, RELU, "cuda", options_for(), tag="built"),
        VerifyRequest(task, RELU, "cuda", options_for(device="cpu"), tag="cpu"),
    ]
    scheduler.source = iter(requests)
    answered = list(scheduler._admit())
    scheduler._start_builds()
    assert [(r.tag, v.status) for r, v in answered] == [("rejected", "static_violation")]
    assert [(name, args[0]) for name, args in ray.submitted] == [("build_artifacts", RELU)]  # the build task
    assert [item.req.tag for item in scheduler.building.values()] == ["built"]
    assert [item.req.tag for item in scheduler.ready] == ["cpu"]  # runs on the CPU: nothing to build


def test_ray_layout_leaves_builds_a_cpu_and_never_asks_for_more_runners_than_cpus():
    assert plan_layout({"CPU": 2}) == Layout(False, 1, 2, 2, False)
    assert plan_layout({"CPU": 16, "GPU": 4}, build_jobs=3) == Layout(True, 4, 16, 3, True)
    assert plan_layout({"CPU": 1, "GPU": 4}).can_build is False  # the one CPU is the runner's
    assert plan_layout({"CPU": 2, "GPU": 8}).runners == 2


# -- the retry-once rule and the store ----------------------------------------------------------------------------


def test_one_dead_judge_is_retried_fresh_and_the_store_keeps_the_verdict_without_the_note(task, tmp_path):
    req = VerifyRequest(task, RELU, "cuda", options_for())
    script, fresh, retries = [_died("the judge was killed"), _verdict()], [], []

    def attempt(is_fresh: bool) -> Verdict:
        fresh.append(is_fresh)
        return script.pop(0)

    verdict, attempts = retry_once(req, attempt, lambda: retries.append(1))
    assert fresh == [False, True] and retries == [1]
    store = VerdictStore(tmp_path / "v.sqlite")
    key = store_key(req, "cpu")
    answer = keep(store, key, verdict, attempts)
    assert answer.status == "correct"
    assert answer.notes == (f"{RETRIED} (the judge was killed)",)
    again = from_store(store, key)
    assert again.status == "correct" and again.notes == (STORE_NOTE,)  # this run's retry is not stored


def test_a_second_death_is_an_infra_error_at_stage_runner_and_is_not_stored(task, tmp_path):
    req = VerifyRequest(task, RELU, "cuda", options_for())
    script = [_died("killed"), _died("out of memory"), _verdict()]
    verdict, attempts = retry_once(req, lambda fresh: script.pop(0))
    assert len(script) == 1  # no third attempt
    assert (verdict.status, verdict.stage) == ("infra_error", "runner")
    assert verdict.message == "the runner died twice (killed; out of memory)"
    assert verdict.feedback.startswith("infra_error: the runner died twice") and "Not your fault" in verdict.feedback
    store = VerdictStore(tmp_path / "v.sqlite")
    answer = keep(store, store_key(req, "cpu"), verdict, attempts)
    assert answer.notes == () and len(store) == 0


def test_a_dead_ray_actor_leaves_no_verdict_so_the_infra_error_is_made_for_the_runners_device(task):
    attempts = Attempts()
    assert attempts.died("its Ray actor process died") is True  # one more try
    assert attempts.died("its Ray actor process died") is False
    crash = attempts.give_up(VerifyRequest(task, RELU, "cuda", options_for()), None, device="NVIDIA H200")
    assert (crash.status, crash.stage, crash.device, crash.task) == ("infra_error", "runner", "NVIDIA H200", task.name)
    assert crash.message.startswith("the runner died twice (its Ray actor process died; its Ray")


def test_no_store_means_no_lookup_and_an_unchanged_answer():
    assert from_store(None, "k") is None
    verdict = _verdict()
    assert keep(None, None, verdict) is verdict

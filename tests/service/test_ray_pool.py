"""The Ray backend on a real local Ray instance (CPU only): statuses, the store, bounded reads, dead runners.

One test, so that pytest-xdist never starts a second Ray instance for this module (starting one takes
seconds); each part is a function below.
"""

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from procs import cmdline, descendants, process_tree  # noqa: E402

from kernelzero.service.contract import RETRIED  # noqa: E402
from kernelzero.service.pool import VerifyRequest, verify_many  # noqa: E402
from kernelzero.service.ray_pool import verify_many_ray  # noqa: E402
from kernelzero.service.store import VerdictStore  # noqa: E402
from kernelzero.tasks import load_suite, resize, select  # noqa: E402
from kernelzero.verify import options_for  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
MISSING_ARG = (KERNELS / "wrong" / "triton_launch_missing_arg.py").read_text()  # runtime_error, from the judge
NO_KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
OPTS = options_for(compile_check=False, trials=1)


def test_ray_backend(tmp_path, monkeypatch):
    # cold judges in the actors (they take this environment): the killer below must hit the judge of the job, not a
    # standby started ahead for the next one (the GPU gate sets KZ_STANDBY)
    monkeypatch.setenv("KZ_STANDBY", "0")
    # and their own fork server: with the gate's shared one (KZ_ZYGOTE_SOCKET) a judge is no descendant of its actor, and
    # the killer below found none to kill (H200 gate, 2026-12-04)
    monkeypatch.delenv("KZ_ZYGOTE_SOCKET", raising=False)
    # started here, so verify_many_ray must leave it running
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        task = resize(select(load_suite("kz-basic").tasks, names=["level1/23_Softplus"])[0], preset="smoke")
        _statuses_match_the_local_pool_and_the_store_answers_a_repeat(task, tmp_path)
        _an_endless_iterable_is_read_only_as_far_as_in_flight_allows(task)
        _dead_runners_are_replaced_and_each_request_retried_once(task)
        assert ray.is_initialized()
    finally:
        ray.shutdown()


def _statuses_match_the_local_pool_and_the_store_answers_a_repeat(task, tmp_path):
    broken = replace(task, name="broken", source="raise RuntimeError('this reference cannot be imported')\n")

    def requests():  # one request that runs the judge, two the verifier answers before running anything, one on a
        # task whose reference cannot be imported (verify() raises: the request's verdict is task_broken)
        return [
            VerifyRequest(task, c, "triton", OPTS, tag=i)
            for i, c in enumerate([MISSING_ARG, "not python (", NO_KERNEL])
        ] + [VerifyRequest(broken, MISSING_ARG, "triton", OPTS, tag=3)]

    store = VerdictStore(tmp_path / "v.sqlite")
    with ThreadPoolExecutor(1) as side:  # the local pool at the same time
        local = side.submit(lambda: {r.tag: v for r, v in verify_many(requests(), jobs=1)})
        got = {r.tag: v for r, v in verify_many_ray(requests(), store=store, runners=1)}
        local = local.result()
    assert [got[i].status for i in range(4)] == [local[i].status for i in range(4)]
    assert [got[i].status for i in range(4)] == ["runtime_error", "format_error", "no_kernel", "task_broken"]
    assert got[3].stage == "reference" and "cannot be imported" in got[3].message
    assert [got[i].message for i in range(3)] == [local[i].message for i in range(3)]
    # the device each ran on is the local pool's (the CPU in CI, the GPU's name in the GPU gate)
    assert [got[i].device for i in range(4)] == [local[i].device for i in range(4)]
    assert all("answered from the verdict store" not in v.notes for v in got.values())
    assert len(store) == 3  # task_broken is not stored
    again = {r.tag: v for r, v in verify_many_ray(requests()[:3], store=store, runners=1)}
    assert [again[i].status for i in range(3)] == [got[i].status for i in range(3)]
    assert all("answered from the verdict store" in v.notes for v in again.values())


def _an_endless_iterable_is_read_only_as_far_as_in_flight_allows(task):
    pulled = []

    def endless():
        while True:
            pulled.append(len(pulled))
            yield VerifyRequest(task, f"not python ( {len(pulled)}", "triton", OPTS, tag=len(pulled))

    results = verify_many_ray(endless(), runners=2, in_flight=3)
    got = [next(results) for _ in range(12)]
    results.close()  # kills its runners
    assert all(v.status == "format_error" for _, v in got)
    assert len(pulled) <= 12 + 3


def _kill_tree(pid: int, parents: dict[int, int]) -> None:
    """SIGKILL `pid` and everything below it (a judge runs in its own session: end it as a dead host would)."""
    for victim in [pid, *descendants(pid, parents)]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _Killer(threading.Thread):
    """Ends this test's runners mid-verification, one step of `plan` per verification attempt.

    "actor": SIGKILL the runner actor's process (and what it started); "judge": only the judge process
    the runner started, so `verify()` reports its death. A busy runner's process is named
    `ray::VerifyRunner.verify` by Ray; the local Ray instance runs below this process.
    """

    def __init__(self, plan: list[str]):
        super().__init__(daemon=True)
        self.plan, self.done, self.stop = list(plan), [], threading.Event()

    def run(self):
        seen: set[int] = set()  # judges (one per attempt) already dealt with
        while self.plan and not self.stop.is_set():
            parents = process_tree()
            for pid in descendants(os.getpid(), parents):
                if not cmdline(pid).startswith("ray::VerifyRunner.verify"):
                    continue
                judges = [j for j in descendants(pid, parents) if "kernelzero.verify.judge.launch" in cmdline(j)]
                if judges and judges[0] not in seen:
                    seen.add(judges[0])
                    step = self.plan.pop(0)
                    _kill_tree(pid if step == "actor" else judges[0], parents)
                    self.done.append(step)
                    break
            time.sleep(0.05)


def _dead_runners_are_replaced_and_each_request_retried_once(task):
    """One runner. Request 0: its actor is killed (the pool retries it in a new actor), then that actor's judge
    twice (verify() retries its judge once, alone): infra_error at stage judge, never crash. Request 1: verified."""
    reqs = [VerifyRequest(task, MISSING_ARG, "triton", OPTS, tag=i) for i in range(2)]
    killer = _Killer(["actor", "judge", "judge"])
    killer.start()
    try:
        got = list(verify_many_ray(reqs, runners=1))
    finally:
        killer.stop.set()
        killer.join(10)
    assert killer.done == ["actor", "judge", "judge"]
    assert [r.tag for r, _ in got] == [0, 1]
    crashed, second = got[0][1], got[1][1]
    assert (crashed.status, crashed.stage, crashed.task) == ("infra_error", "judge", task.name), crashed.message
    assert "judge process died" in crashed.message and "on the first try" in crashed.message
    assert any(n.startswith(f"{RETRIED} (") for n in crashed.notes)  # the dead actor: retried once by the pool
    assert second.status == "runtime_error" and not any(RETRIED in n for n in second.notes)

"""A kept local pool (service/pool.py `LocalPool(keep=True)`): its standby judges outlive a run, so the next run's
first request finds a judge ready, and `close()` ends them; a pool made for one run ends them with the run. Real
judges and workers on the CPU (Triton through its interpreter), as the trainer's reward uses them step after step."""

from __future__ import annotations

import time
from pathlib import Path

from kernelzero.service.pool import LocalPool, VerifyRequest
from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for

GOOD = (Path(__file__).resolve().parents[1] / "kernels" / "correct" / "triton_gelu.py").read_text()


def _request(tag: int) -> VerifyRequest:
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    source = GOOD + f"\n# sample {tag}\n"  # distinct candidates: nothing is answered from a store
    return VerifyRequest(resize(task, preset="smoke"), source, "triton", options_for(compile_check=False), tag=tag)


def _ready(pool: LocalPool) -> int:
    with pool.standby.lock:
        return sum(len(ready) for ready in pool.standby.ready.values())


def test_a_kept_pool_serves_its_next_run_from_a_judge_it_left_ready():
    pool = LocalPool(jobs=1, standby=1, keep=True)
    try:
        ((_, first),) = list(pool.run([_request(0)]))
        assert first.status == "correct", first.message
        assert pool.standby.taken == 0  # none was ready for the first request: one was started for the next
        deadline = time.monotonic() + 60
        while _ready(pool) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ready(pool) == 1 and not pool.standby.closed  # the run ended; its judge did not
        ((_, second),) = list(pool.run([_request(1)]))
        assert second.status == "correct", second.message
        assert pool.standby.taken == 1
    finally:
        pool.close()
    assert pool.standby.closed and _ready(pool) == 0


def test_a_pool_for_one_run_ends_its_judges_with_the_run():
    pool = LocalPool(jobs=1, standby=1)
    ((_, verdict),) = list(pool.run([_request(2)]))
    assert verdict.status == "correct", verdict.message
    assert pool.standby.closed and _ready(pool) == 0


def test_the_pool_gives_its_standby_judges_the_requests_each_serves(monkeypatch):
    from kernelzero.service.pool import LocalPool
    from kernelzero.verify.judge import turns

    monkeypatch.delenv(turns.SERVES_ENV, raising=False)
    assert LocalPool(jobs=1, standby=0).standby.serves == turns.SERVES  # the default: 8 requests a judge
    assert LocalPool(jobs=1, standby=0, serves=6).standby.serves == 6  # a training config's verifier.serves
    monkeypatch.setenv(turns.SERVES_ENV, "3")
    assert LocalPool(jobs=1, standby=0).standby.serves == 3

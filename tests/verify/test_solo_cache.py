"""The solo-reference cache's lock (verify/judge/solo.py `cache_lock`): judges that start together on one task time
its reference once, and one that holds a GPU lease never waits for it. Real locks on a folder of the test's own;
the timing itself needs a GPU (the GPU gate)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from kernelzero.verify import options_for
from kernelzero.verify.judge.solo import cache_lock


def _judge(folder) -> SimpleNamespace:
    return SimpleNamespace(opts=options_for(baselines_dir=str(folder) if folder else None), device_name="NVIDIA H200")


def test_judges_on_one_cache_take_turns(tmp_path):
    spans: dict[str, list[float]] = {}
    first_in = threading.Event()

    def hold(name: str, after: threading.Event | None) -> None:
        if after is not None:
            after.wait(10)
        with cache_lock(_judge(tmp_path)):
            spans[name] = [time.monotonic()]
            first_in.set()
            time.sleep(0.4)
            spans[name].append(time.monotonic())

    threads = [threading.Thread(target=hold, args=("a", None)), threading.Thread(target=hold, args=("b", first_in))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert spans["b"][0] >= spans["a"][1] - 0.01, spans
    assert (tmp_path / "NVIDIA_H200.lock").exists()


def test_no_cache_no_lock(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with cache_lock(_judge(None)):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_judge_holding_a_gpu_lease_never_waits_for_the_cache(tmp_path, monkeypatch):
    """The stricter second verification runs inside the first's exclusive lease: were it to wait for the cache lock,
    whose holder may be waiting for that GPU, the two would wait for each other."""
    import kernelzero.verify.judge.lease as lease

    monkeypatch.setattr(lease, "LOCK_DIR", tmp_path / "locks")
    other_holds, done = threading.Event(), threading.Event()

    def other() -> None:
        with cache_lock(_judge(tmp_path)):
            other_holds.set()
            done.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert other_holds.wait(10)
    start = time.monotonic()
    with lease.gpu_lease("gpu-c"), cache_lock(_judge(tmp_path)):
        waited = time.monotonic() - start
    done.set()
    thread.join(10)
    assert waited < 1.0

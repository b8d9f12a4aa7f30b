"""The verdict store (keys, concurrent writers, what is not stored) and the local pool."""

import multiprocessing
from dataclasses import replace
from pathlib import Path

from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.store import VerdictStore, request_key
from kernelzero.tasks import load_suite, resize, select
from kernelzero.types import Task, Verdict
from kernelzero.verify import options_for

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
TASK = Task("t", "import torch\nn = 4\n")


def _verdict(status="correct", stage="done", task="t") -> Verdict:
    return Verdict(
        status=status,
        task=task,
        task_hash="h",
        candidate_hash="c",
        backend="triton",
        profile="default",
        device="cpu",
        stage=stage,
    )


def test_key_changes_with_each_part_of_the_request():
    opts = options_for()
    base = request_key(TASK, "code", "triton", opts, "cpu")
    assert base == request_key(TASK, "```python\ncode\n```", "triton", opts, "cpu")  # same extracted code
    assert base == request_key(TASK, "code", "triton", replace(opts, baselines_dir="x"), "cpu")
    others = [
        request_key(TASK, "code2", "triton", opts, "cpu"),
        request_key(TASK, "code", "cuda", opts, "cpu"),
        request_key(TASK, "code", "triton", options_for("strict"), "cpu"),
        request_key(TASK, "code", "triton", opts, "NVIDIA H200"),
        request_key(replace(TASK, sizes={"n": 2}), "code", "triton", opts, "cpu"),
    ]
    assert len({base, *others}) == 6


def test_store_roundtrip_first_writer_wins_and_judge_failures_are_not_kept(tmp_path):
    store = VerdictStore(tmp_path / "v.sqlite")
    assert store.get("k") is None
    assert store.put("k", _verdict()).status == "correct"
    assert store.put("k", _verdict("mismatch")).status == "correct"
    assert store.get("k").status == "correct" and len(store) == 1
    store.put("j", _verdict("crash", stage="judge"))
    assert store.get("j") is None
    assert VerdictStore(tmp_path / "v.sqlite").counts() == {"correct": 1}  # persists across opens


def _writer(path: str, start: int) -> None:
    store = VerdictStore(path)
    for i in range(start, start + 50):
        store.put(f"k{i % 75}", _verdict(task=f"t{i}"))


def test_concurrent_writer_processes(tmp_path):
    path = str(tmp_path / "v.sqlite")
    VerdictStore(path)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, s)) for s in (0, 25, 50)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert len(VerdictStore(path)) == 75


def test_pool_verifies_then_answers_from_the_store(tmp_path):
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    task = resize(task, preset="smoke")
    good = (KERNELS / "correct" / "triton_gelu.py").read_text()
    bad = "not python ("
    opts = options_for(compile_check=False)
    store = VerdictStore(tmp_path / "v.sqlite")
    reqs = [VerifyRequest(task, good, "triton", opts, tag=0), VerifyRequest(task, bad, "triton", opts, tag=1)]
    first = {r.tag: v for r, v in verify_many(reqs, jobs=2, store=store)}
    assert first[0].status == "correct" and first[1].status == "format_error"
    again = {r.tag: v for r, v in verify_many(reqs, jobs=2, store=store)}
    assert again[0].status == "correct" and "answered from the verdict store" in again[0].notes
    assert len(store) == 2

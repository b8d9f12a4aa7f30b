"""The verdict store (keys, concurrent writers, what is not stored) and the local pool."""

import multiprocessing
from dataclasses import fields, replace
from pathlib import Path

from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.store import VerdictStore, request_key
from kernelzero.tasks import load_suite, resize, select
from kernelzero.types import Task, Verdict
from kernelzero.verify import VerifyOptions, options_for

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


def _changed(value):
    """A value of the same kind as `value` but different from it (every field type of Task and VerifyOptions)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, dict):
        return {**value, "changed": {"n": 1} if value and isinstance(next(iter(value.values())), dict) else "1"}
    if value is None:
        return 1
    raise AssertionError(f"no changed value for {value!r}: extend _changed")


def test_every_field_of_task_and_options_is_in_the_key():
    """Issue 27: the key omitted Task.tie_prone and a wrong verdict was served. Walking dataclasses.fields makes a
    field added later part of this test too."""
    task = Task("t", "import torch\nn = 4\n", suite="s", level=1, problem_id=3, sizes={"n": 2}, atol=0.01, note="n")
    task = replace(task, presets={"smoke": {"n": 1}}, rtol=0.02, tie_prone={"1": "output 0 dim -1"})
    opts = options_for()
    base = request_key(task, "code", "triton", opts, "cpu")
    keys = {base}
    for f in fields(Task):
        changed = request_key(replace(task, **{f.name: _changed(getattr(task, f.name))}), "code", "triton", opts, "cpu")
        assert changed != base, f"Task.{f.name} is not in the store key"
        keys.add(changed)
    for f in fields(VerifyOptions):
        changed = replace(opts, **{f.name: _changed(getattr(opts, f.name))})
        assert request_key(task, "code", "triton", changed, "cpu") != base, f"VerifyOptions.{f.name} is not in the key"
        keys.add(request_key(task, "code", "triton", changed, "cpu"))
    assert len(keys) == 1 + len(fields(Task)) + len(fields(VerifyOptions))


def test_key_changes_with_each_part_of_the_request():
    opts = options_for()
    base = request_key(TASK, "code", "triton", opts, "cpu")
    assert base == request_key(TASK, "```python\ncode\n```", "triton", opts, "cpu")  # same extracted code
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

"""Serving judges (verify/judge/serving.py, turns.py, standby.py) on the CPU, real judge and worker processes: a
standby judge serves requests in turn, each candidate in a fresh worker that finds no trace of the one before; it
keeps the task's reference process only for the same task and options, and says so; it ends after a verdict that
says a process went wrong, and its standby starts another in its place."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from test_standby import _wait_started as _ready

from kernelzero.tasks import load_suite, resize, select
from kernelzero.types import STATUSES, to_dict
from kernelzero.verify import options_for, verify
from kernelzero.verify.judge import turns
from kernelzero.verify.judge.judge_io import answered_line, sandbox_spec
from kernelzero.verify.judge.run import _judge_output
from kernelzero.verify.judge.serving import KEPT_NOTE
from kernelzero.verify.judge.standby import Standby

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
# a candidate that fails when anything of an earlier candidate is left: a flag in its interpreter, a file in its folder
MARKED = """import builtins, os
if getattr(builtins, "_kz_seen", False) or os.path.exists("kz_seen"):
    raise RuntimeError("a trace of an earlier candidate")
builtins._kz_seen = True
open("kz_seen", "w").close()
"""


def _task(name: str):
    (task,) = select(load_suite("kz-basic").tasks, names=[name])
    return resize(task, preset="smoke")


def _kept(verdict) -> bool:
    return KEPT_NOTE in verdict.notes


def test_a_serving_judge_serves_its_requests_each_in_a_fresh_worker_and_keeps_the_reference():
    task = _task("level1/21_GELU")
    good = MARKED + (KERNELS / "correct" / "triton_gelu.py").read_text()
    opts = options_for(compile_check=False, static_checks=False)
    standby = Standby(1, serves=3)
    try:
        assert verify(task, good, "triton", opts, standby=standby).status == "correct"  # cold: it primes the standby
        (judge,) = _ready(standby)
        served = [verify(task, good, "triton", opts, standby=standby) for _ in range(3)]
        assert [v.status for v in served] == ["correct"] * 3, [v.message for v in served]
        assert [_kept(v) for v in served] == [False, True, True]  # the same task and options from the second on
        assert standby.taken == 3 and standby.again == 2
        assert judge.wait(timeout=60) == 0  # it served its three requests and ended
        (fresh,) = _ready(standby)  # asked for when its last request was taken
        assert fresh is not judge
    finally:
        standby.close()


def test_a_kept_reference_serves_only_its_own_task_and_options():
    gelu, relu = _task("level1/21_GELU"), _task("level1/24_LeakyReLU")
    gelu_src = (KERNELS / "correct" / "triton_gelu.py").read_text()
    relu_src = (KERNELS / "correct" / "triton_leaky_relu.py").read_text()
    opts = options_for(compile_check=False)
    looser = options_for(compile_check=False, atol=2e-2)
    standby = Standby(1, serves=5)
    try:
        verify(gelu, gelu_src, "triton", opts, standby=standby)
        _ready(standby)
        order = [(gelu, gelu_src, opts), (relu, relu_src, opts), (relu, relu_src, opts), (relu, relu_src, looser)]
        served = [verify(task, src, "triton", o, standby=standby) for task, src, o in order]
        assert [v.status for v in served] == ["correct"] * 4, [v.message for v in served]
        assert [_kept(v) for v in served] == [False, False, True, False]
        assert standby.again == 3
    finally:
        standby.close()


def test_a_serving_judge_ends_after_a_crash_and_another_takes_its_place():
    task = _task("level1/21_GELU")
    good = (KERNELS / "correct" / "triton_gelu.py").read_text()
    dies = good + "\nimport os\nos._exit(3)\n"  # the worker ends at import without a result
    opts = options_for(compile_check=False, static_checks=False)
    standby = Standby(1, serves=4)
    try:
        verify(task, good, "triton", opts, standby=standby)
        (judge,) = _ready(standby)
        assert verify(task, good, "triton", opts, standby=standby).status == "correct"
        crashed = verify(task, dies, "triton", opts, standby=standby)
        assert crashed.status == "crash", crashed.message
        assert judge.wait(timeout=60) == 0  # it answered `last` and ended, with two of its four requests left
        after = verify(task, good, "triton", opts, standby=standby)  # a judge started in its place
        assert after.status == "correct" and not _kept(after), after.notes
        assert standby.again == 1 and standby.started >= 2
    finally:
        standby.close()


# -- the rules, without a judge -------------------------------------------------------------------------------------


def test_the_number_of_requests_a_judge_serves_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(turns.SERVES_ENV, raising=False)
    assert turns.serves() == turns.SERVES == 8  # eight requests per judge (gated on the H200 at 92a41dc)
    monkeypatch.setenv(turns.SERVES_ENV, "8")
    assert turns.serves() == 8 and Standby(0).serves == 8 and Standby(0, serves=2).serves == 2
    for bad in ("eight", "0", "-1", "1.5"):
        monkeypatch.setenv(turns.SERVES_ENV, bad)
        with pytest.raises(ValueError, match=turns.SERVES_ENV):
            turns.serves()


def test_a_judge_goes_on_only_after_a_verdict_that_says_nothing_went_wrong_with_a_process():
    for status in STATUSES:
        goes_on = turns.may_go_on({"verdict": {"status": status}})
        assert goes_on == (status not in ("timeout", "crash", "oom", "infra_error", "task_broken", "tampered")), status
    for payload in ({"retry_alone": "a fault"}, {"error": "a bug"}, {}, {"verdict": None}):
        assert not turns.may_go_on(payload)


def test_the_reference_key_is_the_task_and_the_options():
    task = _task("level1/21_GELU")
    request = {"task": to_dict(task), "options": asdict(options_for()), "source": "a", "lease_marker": "/x"}
    same = {**request, "source": "b", "lease_marker": "/y"}  # another candidate of the same task
    assert turns.reference_key(request) == turns.reference_key(same)
    assert turns.reference_key(request) != turns.reference_key({**request, "options": asdict(options_for(atol=0.1))})
    other = to_dict(_task("level1/24_LeakyReLU"))
    assert turns.reference_key(request) != turns.reference_key({**request, "task": other})


class _Waiting:
    """A ready judge as `Standby` sees one: alive, with a pid."""

    def __init__(self, pid: int):
        self.pid = pid

    def poll(self):
        return None


def test_take_prefers_the_judge_that_kept_the_requests_reference_then_a_fresh_one():
    standby = Standby(0, serves=8)
    standby.count = 3  # no starter thread: the ready judges are put in by hand
    opts = options_for()
    key = standby._key({"A": "1"}, sandbox_spec(opts, False))
    standby.known.add(key)
    rested, fresh, kept = _Waiting(1), _Waiting(2), _Waiting(3)
    standby.ready[key].extend([rested, fresh, kept])
    standby.left.update({1: 5, 2: 8, 3: 5})
    standby.last.update({1: "another task", 3: "this task"})
    assert standby.take({"A": "1"}, opts, False, affinity="this task") is kept
    assert standby.take({"A": "1"}, opts, False, affinity="this task") is fresh
    assert standby.take({"A": "1"}, opts, False, affinity="this task") is rested
    assert standby.again == 2 and standby.left == {1: 4, 2: 7, 3: 4} and set(standby.lent) == {1, 2, 3}
    assert standby.returned(kept, True, "this task") and list(standby.ready[key]) == [kept]
    assert not standby.returned(fresh, False) and 2 not in standby.left  # it ends: another is asked for
    assert standby.wanted.qsize() == 1


def test_the_caller_takes_the_answer_on_its_own_answered_line(tmp_path):
    mine, other = tmp_path / "result.json", tmp_path / "other.json"
    script = (
        "import os, sys, time\n"
        f"os.write(1, {answered_line(other, True)!r})\n"  # another request's line is not this caller's answer
        "time.sleep(0.3)\n"
        f"os.write(1, b'a warning\\n' + {answered_line(mine, True)!r})\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True)
    try:
        out, again = _judge_output(proc, 60, tmp_path / "leased", mine)
        assert again and out.endswith(answered_line(mine, True)) and proc.poll() is None  # it serves on
    finally:
        proc.kill()
        proc.wait()
    last = subprocess.Popen([sys.executable, "-c", "print('no answer line')"], stdout=subprocess.PIPE)
    assert _judge_output(last, 60, tmp_path / "leased", mine) == (b"no answer line\n", False)  # the output's end
    last.wait()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_serving_judge_on_the_gpu_keeps_a_reference_and_gives_back_its_leases_gpu():
    """On the GPU: two requests of one task through one judge, the second on the kept reference; while the judge
    waits between them the memory ledger holds one standing base of its processes and none of the leases its
    first request took (memory.release_kept), and the timings of both are those of honest verdicts."""
    from kernelzero.verify.judge.lease import device_uuid
    from kernelzero.verify.judge.memory import BASE_BYTES, GIB, _folder

    task = _task("level1/21_GELU")
    good = (KERNELS / "correct" / "triton_gelu.py").read_text()
    opts = options_for()
    standby = Standby(1, serves=3)
    try:
        assert verify(task, good, "triton", opts, standby=standby).status == "correct"
        (judge,) = _ready(standby)
        first = verify(task, good, "triton", opts, standby=standby)
        uuid, group = device_uuid(), os.getpgid(judge.pid)
        deadline, entries = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            entries = _entries_of(_folder(uuid), group)
            if [name.endswith(".base") for name, _ in entries] == [True]:
                break
            time.sleep(0.2)
        assert [name.endswith(".base") for name, _ in entries] == [True], entries  # its base alone, no kept lease
        assert BASE_BYTES <= entries[0][1] <= BASE_BYTES + GIB, entries
        second = verify(task, good, "triton", opts, standby=standby)
        assert first.status == second.status == "correct", (first.message, second.message)
        assert not _kept(first) and _kept(second) and standby.again == 1
        for verdict in (first, second):
            assert verdict.timing is not None and verdict.timing.mean_ms > 0, verdict.timing_note
            assert verdict.stage_seconds["cpu_s_judge"] < 60, verdict.stage_seconds  # counted from its request
    finally:
        standby.close()


def _entries_of(folder: Path, group: int) -> list[tuple[str, int]]:
    """The ledger entries written by processes of process group `group` (an entry's name starts with its pid)."""
    found = []
    for entry in sorted(folder.iterdir()):
        try:
            if os.getpgid(int(entry.name.split("-")[0])) == group:
                found.append((entry.name, int(entry.read_text() or 0)))
        except (ValueError, ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return found


def test_a_judge_that_said_it_serves_again_but_ends_without_answering_costs_a_fresh_judge_not_a_verdict():
    """A serving judge that fails between its answer `again` and the next request (it could not start its next
    worker, say) ends with that request unread: the caller verifies it in a fresh judge, never reports it."""
    task = _task("level1/21_GELU")
    good = (KERNELS / "correct" / "triton_gelu.py").read_text()
    opts = options_for(compile_check=False)
    gone = subprocess.Popen(  # it reads the request's two lines and ends, as such a judge does
        [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.stdin.readline()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    standby = Standby(0, serves=8)
    standby.count = 1  # no starter thread: its one ready judge is put in by hand
    from kernelzero.verify.backends import get_backend
    from kernelzero.verify.judge.run import _judge_env

    key = standby._key(_judge_env(get_backend("triton"), opts), sandbox_spec(opts, False))
    standby.known.add(key)
    standby.ready[key].append(gone)
    standby.left[gone.pid], standby.last[gone.pid] = 7, "another task"
    verdict = verify(task, good, "triton", opts, standby=standby)
    assert verdict.status == "correct", verdict.message
    assert standby.taken == 1 and standby.again == 1 and gone.wait(10) == 0  # it was taken, and the request judged
    assert not standby.ready[key] and gone.pid not in standby.left  # forgotten, another asked for

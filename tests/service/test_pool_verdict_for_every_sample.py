"""Every request of a batch gets a verdict (issue 23, "faults blamed right"): a task whose own reference fails
gives `task_broken` to its samples alone, a fault inside the pool gives `infra_error` (stage "exception") to the
request it hit, neither is stored, and only a request no pool can take (an unknown backend) raises.

Real components throughout: the broken tasks are real task modules whose reference raises (on import, in
get_inputs); the pool fault is a real SQLite error (the store's table dropped under it).
"""

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.store import VerdictStore
from kernelzero.tasks import load_suite, resize, select
from kernelzero.types import SKIPPED_STATUSES, STATUSES
from kernelzero.verify import fault_verdict, options_for
from kernelzero.verify.verdicts import FAULT_MESSAGE_LIMIT

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
GELU = (KERNELS / "correct" / "triton_gelu.py").read_text()
NO_KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
OPTS = options_for(compile_check=False, trials=1)


@pytest.fixture(scope="module")
def task():
    return resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")


def _no_inputs(task):
    """The task with a get_inputs that raises: its module imports, its inputs cannot be drawn."""
    source = task.source.replace(
        "def get_inputs():", "def get_inputs():\n    raise RuntimeError('no inputs')\n\n\ndef _x():"
    )
    assert source != task.source
    return replace(task, name="no_inputs", source=source)


def test_the_skipped_statuses_follow_oom_in_statuses():
    at = STATUSES.index("oom")
    assert STATUSES[at + 1 : at + 3] == SKIPPED_STATUSES == ("infra_error", "task_broken")


def test_a_broken_task_among_good_ones_gets_task_broken_and_the_batch_completes(task, tmp_path):
    broken = replace(task, name="broken", source="raise RuntimeError('this reference cannot be imported')\n")
    requests = [
        VerifyRequest(task, NO_KERNEL, "triton", OPTS, tag="good"),
        VerifyRequest(broken, GELU, "triton", OPTS, tag="import"),
        VerifyRequest(_no_inputs(task), GELU, "triton", OPTS, tag="inputs"),
        VerifyRequest(task, "not python (", "triton", OPTS, tag="format"),
    ]
    store = VerdictStore(tmp_path / "v.sqlite")
    got = {req.tag: verdict for req, verdict in verify_many(requests, jobs=2, store=store, standby=0)}
    assert {t: v.status for t, v in got.items()} == {
        "good": "no_kernel",
        "import": "task_broken",
        "inputs": "task_broken",
        "format": "format_error",
    }
    for tag, cause in (("import", "cannot be imported"), ("inputs", "no inputs")):
        v = got[tag]
        assert v.stage == "reference" and v.message.startswith("the task itself is broken"), v.message
        assert cause in v.message and len(v.message) <= FAULT_MESSAGE_LIMIT
        assert "Not your fault" in v.feedback and v.task == requests[1 if tag == "import" else 2].task.name
    assert store.counts() == {"no_kernel": 1, "format_error": 1}  # the task's fault is never stored


def test_a_fault_inside_the_pool_is_the_verdict_of_the_request_it_hit(task, tmp_path):
    store = VerdictStore(tmp_path / "v.sqlite")
    with sqlite3.connect(tmp_path / "v.sqlite") as con:
        con.execute("DROP TABLE verdicts")  # every store lookup now raises sqlite3.OperationalError
    requests = [VerifyRequest(task, NO_KERNEL, "triton", OPTS, tag=i) for i in range(3)]
    got = sorted((req.tag, v) for req, v in verify_many(requests, jobs=2, store=store))
    assert [tag for tag, _ in got] == [0, 1, 2]
    for _, v in got:
        assert (v.status, v.stage) == ("infra_error", "exception")
        assert v.message.startswith("the verifier raised OperationalError: no such table")
        assert "OperationalError" in v.error_log and "Not your fault" in v.feedback


def test_an_unknown_backend_is_the_callers_error_and_raises(task):
    with pytest.raises(ValueError, match="backend"):
        list(verify_many([VerifyRequest(task, NO_KERNEL, "no-such-language", OPTS)], jobs=1))


def test_fault_verdict_sorts_exceptions_into_task_broken_and_infra_error(task):
    failed = ValueError("the task's reference process failed during get_inputs (crash): exit -9")
    v = fault_verdict(task, GELU, "triton", OPTS, failed)
    assert (v.status, v.stage) == ("task_broken", "reference")
    assert (
        v.message == "the task itself is broken: the task's reference process failed during get_inputs (crash): exit -9"
    )
    v = fault_verdict(task, GELU, "triton", OPTS, ValueError("the task itself is broken (get_inputs): boom"))
    assert (v.status, v.message) == ("task_broken", "the task itself is broken (get_inputs): boom")
    other = ValueError("a ValueError about something else")  # not the broken-task wording: the verifier's fault
    assert fault_verdict(task, GELU, "triton", OPTS, other).status == "infra_error"
    v = fault_verdict(task, GELU, "triton", OPTS, OSError("x" * 5000))
    assert (v.status, v.stage) == ("infra_error", "exception")
    assert v.message.startswith("the verifier raised OSError: xxx") and len(v.message) == FAULT_MESSAGE_LIMIT
    assert v.task == task.name and v.backend == "triton" and v.candidate_hash

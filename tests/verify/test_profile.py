"""The profiled run (verify/profile.py): the candidate's kernels by time, from its own sandboxed process.

On CPU the rows are operators by CPU time (the device rows need a GPU); the protocol, the sandbox's folder, the
deadline and every failure path are the same.
"""

import tempfile
import time
from pathlib import Path

from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify.profile import profile_candidate

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _gelu():
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    return resize(task, preset="smoke")


def test_a_correct_candidate_is_profiled_with_its_work_first(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    torch_gelu = (
        "import torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.nn.functional.gelu(x) * 1.0\n"
    )
    rows = profile_candidate(_gelu(), torch_gelu, "triton", calls=2)
    assert rows, "no rows"
    names = [row.name for row in rows]
    assert "aten::gelu" in names and "aten::mul" in names
    assert all(row.ms >= 0 and row.calls >= 1 for row in rows)
    assert [row.ms for row in rows] == sorted((row.ms for row in rows), reverse=True)
    assert list(tmp_path.iterdir()) == []  # its folder (made here: kz-profile-*) is gone


def test_a_triton_candidate_runs_through_the_interpreter(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rows = profile_candidate(_gelu(), (KERNELS / "correct" / "triton_gelu.py").read_text(), "triton", calls=1)
    assert rows is not None  # the interpreter ran it (its numpy work is not an aten op: the rows may be few)


def test_a_failing_candidate_or_a_forged_line_gives_none():
    raises = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        raise ValueError\n"
    assert profile_candidate(_gelu(), raises, "triton") is None
    garbage = "print('kz-profile {not json')\n" + raises.replace("raise ValueError", "return x")
    assert profile_candidate(_gelu(), garbage, "triton") is None  # its early line is not the answer expected


def test_a_hanging_candidate_is_killed_at_the_deadline():
    hangs = "import time, torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
    hangs += "        super().__init__()\n        time.sleep(600)\n"
    start = time.monotonic()
    assert profile_candidate(_gelu(), hangs, "triton", timeout_s=20) is None
    assert time.monotonic() - start < 60

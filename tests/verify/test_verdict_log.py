"""KZ_VERDICT_LOG: verify() appends every verdict as a JSON line (the GPU gate's record of stage times)."""

from __future__ import annotations

import json

from kernelzero.types import Task
from kernelzero.verify import verify

TASK = Task(
    name="t/relu",
    source="import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n",
)


def test_every_verdict_is_appended_and_a_bad_path_never_costs_the_verdict(tmp_path, monkeypatch):
    log = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv("KZ_VERDICT_LOG", str(log))
    first = verify(TASK, "no code here", "triton")
    second = verify(TASK, "class ModelNew:\n    pass\n", "triton")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["status"] for r in lines] == [first.status, second.status]
    assert lines[0]["task"] == "t/relu" and "stage_seconds" in lines[0]
    monkeypatch.setenv("KZ_VERDICT_LOG", str(tmp_path / "no" / "such" / "folder" / "v.jsonl"))
    assert verify(TASK, "no code here", "triton").status == first.status

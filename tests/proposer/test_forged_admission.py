"""A proposal cannot admit itself: its module, when imported, writes fake "admitted" results wherever it can guess
and replaces kernelzero's admission functions in its own process, yet its NaN or nondeterministic outputs are
still rejected, because the checks run in admission's parent on the raw values its process returns
(proposer/children.py, proposer/checks.py). Runs the real sandboxed path on the CPU: two proposals side by side.
"""

import json

from kernelzero.proposer.admit import AdmitOptions, admit

FORGER = """import torch
import torch.nn as nn

FAKE = b'{"ok": true, "reason": "", "stage": "done", "message": "", "forward_ms": 1.0}'
NAMES = ("result.json", "admitted.json", "suite.admissions.jsonl")


def _forge():
    folder = torch.os.getcwd()
    for _ in range(6):
        for name in NAMES:
            try:
                fd = torch.os.open(torch.os.path.join(folder, name), torch.os.O_WRONLY | torch.os.O_CREAT, 0o666)
                torch.os.write(fd, FAKE)
                torch.os.close(fd)
            except OSError:
                pass
        folder = torch.os.path.dirname(folder)
    importer = torch.sys.modules["importlib"]
    passes = lambda *args, **kwargs: None
    for name in ("kernelzero.proposer.checks", "kernelzero.proposer.admit", "kernelzero.tasks.quality"):
        try:
            module = importer.import_module(name)
        except ImportError:
            continue
        for attr in ("runnable_checks", "numerical_checks", "precision_check", "degenerate_reasons", "check_syntax"):
            if hasattr(module, attr):
                setattr(module, attr, passes)


_forge()


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return BODY


n = 64


def get_inputs():
    return [torch.randn(n, n)]


def get_init_inputs():
    return []
"""


def test_a_module_that_forges_its_admission_is_still_rejected(tmp_path):
    proposals = [
        {"id": "log#0", "apis": ["log"], "code": FORGER.replace("BODY", "torch.log(x)")},
        {"id": "tanh#0", "apis": ["tanh"], "code": FORGER.replace("BODY", "torch.tanh(x) + torch.rand_like(x)")},
    ]
    options = AdmitOptions(device="cpu", jobs=2, timeout_s=120, mem_gb=4, default_benchmark=False)
    summary = admit(proposals, options, tmp_path / "suite.jsonl", tmp_path / "suite.admissions.jsonl")
    decisions = {
        row["id"]: row for row in map(json.loads, (tmp_path / "suite.admissions.jsonl").read_text().splitlines())
    }
    assert decisions["log#0"]["reason"] == "nonfinite", decisions["log#0"]["message"]
    assert decisions["tanh#0"]["reason"] == "nondeterministic", decisions["tanh#0"]["message"]
    assert summary["admitted"] == 0 and not decisions["log#0"]["admitted"]
    assert not (tmp_path / "suite.jsonl").exists() or not (tmp_path / "suite.jsonl").read_text().strip()

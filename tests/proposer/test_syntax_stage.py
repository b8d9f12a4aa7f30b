"""Admission's syntax stage (in-process, no code runs), the template generator and the prompt's example."""

import random

import pytest

from kernelzero.proposer.admit import REASONS, check_syntax
from kernelzero.proposer.generator import SUPPORTED, completion_for, write_module
from kernelzero.proposer.prompts import PROMPT_VERSION, build_messages, load_template

GOOD = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(torch.relu(x))


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(
    "code, apis, reason",
    [
        ("", ("relu",), "no_code"),
        ("def broken(:\n", ("relu",), "syntax_error"),
        (GOOD.replace("def get_inputs", "def inputs"), ("relu",), "missing_contract"),
        (GOOD.replace("class Model", "class Net"), ("relu",), "missing_contract"),
        ("import subprocess\n" + GOOD, ("relu",), "forbidden_code"),
        (GOOD.replace("return torch.tanh", "open('x').read()\n        return torch.tanh"), ("relu",), "forbidden_code"),
        (
            GOOD.replace("torch.relu(x)", "torch.relu(x).sum() + AutoModel.from_pretrained('gpt2')"),
            ("relu",),
            "forbidden_code",
        ),
        (GOOD, ("relu", "gelu"), "missing_api"),
        (
            GOOD.replace("torch.tanh(torch.relu(x))", "torch.tanh(torch.relu(x).exp().log().sin())"),
            ("relu",),
            "extra_apis",
        ),
        (GOOD, ("relu", "tanh"), ""),
        (GOOD, ("relu",), ""),  # one API beyond the set is allowed
    ],
)
def test_syntax_stage_reasons(code, apis, reason):
    got, message, _ = check_syntax(code, apis, max_extra=2)
    assert got == reason, message
    assert not reason or REASONS[reason] == "syntax"


def test_every_reason_has_a_stage():
    assert set(REASONS.values()) <= {"syntax", "dedup", "runnable", "numerical"}
    assert len(REASONS) == 20


def test_template_generator_writes_syntax_passing_modules():
    rng = random.Random(0)
    apis = sorted(SUPPORTED)
    written = 0
    for _ in range(150):
        chosen = tuple(rng.sample(apis, rng.choice((2, 3))))
        code = write_module(chosen, seed=1)
        if code is None:
            continue
        written += 1
        reason, message, _ = check_syntax(code, chosen, max_extra=1)  # argmax and the like go through gather
        assert reason == "", f"{chosen}: {reason} {message}\n{code}"
    assert written > 120
    assert write_module(("relu", "no_such_api")) is None
    assert "cannot write" in completion_for(("mse_loss", "l1_loss"))  # two final steps


def test_prompt_lists_the_apis_and_its_example_passes_the_syntax_stage():
    messages = build_messages(["gelu", "linear"], failure_notes=["mismatch: max abs diff 0.3"])
    user = messages[1]["content"]
    assert "`gelu` (elementwise)" in user and "mismatch: max abs diff 0.3" in user and "{{" not in user
    assert "failed" not in build_messages(["gelu", "linear"])[1]["content"]
    assert check_syntax(load_template("example.py"), ("conv2d", "group_norm", "silu"), 0)[0] == ""
    assert PROMPT_VERSION.startswith("proposer-v")

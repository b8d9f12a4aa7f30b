"""Helion's static rules (`verify/backends/helion/static.py`): the kernel construct and what counts as a fallback.

Syntax trees only: nothing is imported or run, so these tests need neither Helion nor a GPU.

    .venv/bin/python -m pytest -q -p no:xdist tests/verify/test_helion_static.py
"""

from __future__ import annotations

import pytest

from kernelzero.verify.static import check_candidate

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport helion\nimport helion.language as hl\n"
KERNEL = """
@helion.kernel(config=helion.Config(block_sizes=[256]))
def double(x):
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        out[tile] = torch.relu(x[tile]) * 2
    return out
"""
MODEL = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {body}
"""


def rules(source: str) -> list[tuple[str, str]]:
    return [(v.rule, v.message) for v in check_candidate(source, "helion")]


def candidate(body: str = "double(x)", kernel: str = KERNEL, head: str = HEAD) -> str:
    return head + kernel + MODEL.format(body=body)


def test_a_kernel_called_from_forward_is_clean():
    assert rules(candidate()) == []


@pytest.mark.parametrize(
    "head, decorator",
    [
        ("import helion as hk\nimport helion.language as hl\nimport torch\nimport torch.nn as nn\n", "@hk.kernel"),
        ("from helion import kernel\nimport helion.language as hl\nimport torch\nimport torch.nn as nn\n", "@kernel()"),
        (HEAD, "@helion.jit"),
    ],
)
def test_the_kernel_construct_under_any_alias(head, decorator):
    source = candidate(
        head=head, kernel=KERNEL.replace("@helion.kernel(config=helion.Config(block_sizes=[256]))", decorator)
    )
    assert rules(source) == []


def test_no_helion_kernel_is_no_kernel():
    triton_only = "import triton\n\n@triton.jit\ndef k(x):\n    pass\n" + MODEL.format(body="x")
    assert [r for r, _ in rules("import torch\nimport torch.nn as nn\n" + triton_only)] == ["no-kernel"]
    # a kernel construct inside a string is not one
    assert [r for r, _ in rules(candidate(kernel='\nDOC = "@helion.kernel"\n', body="x"))] == ["no-kernel"]


def test_a_kernel_forward_never_reaches_is_no_kernel():
    found = rules(candidate(body="x * 1"))
    assert found == [("no-kernel", "ModelNew.forward reaches none of its @helion.kernel functions (double)")]


def test_kernels_reached_through_helpers_and_methods_count():
    helper = KERNEL + "\ndef run(x):\n    return double(x)\n"
    assert rules(candidate(kernel=helper, body="run(x)")) == []
    method = candidate(body="self.go(x)").replace(
        "    def forward(self, x):", "    def go(self, x):\n        return double(x)\n\n    def forward(self, x):"
    )
    assert rules(method) == []


@pytest.mark.parametrize(
    "body, what",
    [
        ("torch.matmul(double(x), x)", "torch.matmul"),
        ("F.gelu(double(x))", "F.gelu"),
        ("double(x) @ x", "the @ operator"),
        ("torch.nn.functional.softmax(double(x), dim=-1)", "torch.nn.functional.softmax"),
    ],
)
def test_pytorch_compute_in_forward_is_a_fallback(body, what):
    found = rules(candidate(body=body))
    assert [r for r, _ in found] == ["fallback"] and what in found[0][1], found


def test_calling_a_pytorch_module_is_a_fallback_and_its_weights_are_not():
    source = candidate(body="self.linear(double(x))").replace(
        "super().__init__()", "super().__init__()\n        self.linear = nn.Linear(4, 4)"
    )
    assert [m for _, m in rules(source)] == [
        "forward computes with PyTorch (the PyTorch module self.linear) outside a Helion kernel"
    ]
    weights = source.replace("self.linear(double(x))", "double(self.linear.weight.t().contiguous())")
    assert rules(weights) == []


def test_allocation_and_views_are_not_compute():
    body = "double(torch.empty_like(x).copy_(x).view(-1)).reshape(x.shape) + torch.zeros(1).sum()"
    assert rules(candidate(body=body)) == []  # methods and operators other than @ are left to the op recorder


def test_pytorch_in_host_code_is_a_fallback_and_inside_device_loops_is_the_kernel():
    host = KERNEL.replace(
        "    out = torch.empty_like(x)\n", "    x = torch.softmax(x, dim=0)\n    out = torch.empty_like(x)\n"
    )
    found = rules(candidate(kernel=host))
    assert found == [("fallback", "double computes with PyTorch (torch.softmax) outside its hl.tile loops")]
    grid = KERNEL.replace("hl.tile(x.numel())", "hl.grid(x.numel())")
    assert rules(candidate(kernel=grid)) == []
    nested = KERNEL.replace(
        "        out[tile] = torch.relu(x[tile]) * 2\n",
        "        if True:\n            out[tile] = torch.sigmoid(x[tile])\n",
    )
    assert rules(candidate(kernel=nested)) == []


@pytest.mark.parametrize(
    "decorator_args, rule",
    [
        ('autotune_effort="quick"', "autotune"),
        ("configs=[helion.Config(block_sizes=[64]), helion.Config(block_sizes=[128])]", "autotune"),
        ("ref_mode=helion.RefMode.EAGER", "fallback"),
    ],
)
def test_autotuning_and_ref_mode_are_refused(decorator_args, rule):
    kernel = KERNEL.replace("config=helion.Config(block_sizes=[256])", decorator_args)
    assert [r for r, _ in rules(candidate(kernel=kernel))] == [rule]


def test_one_config_or_no_autotuning_is_allowed():
    for args in ('autotune_effort="none"', "configs=[helion.Config(block_sizes=[64])]", ""):
        assert rules(candidate(kernel=KERNEL.replace("config=helion.Config(block_sizes=[256])", args))) == []


def test_autotune_and_set_config_calls_are_refused():
    for call in ("double.autotune((x,))", "double.bind((x,)).set_config(helion.Config(block_sizes=[64]))"):
        source = candidate(body=f"({call}, double(x))[1]")
        assert [r for r, _ in rules(source)] == ["autotune"], call


def test_helion_and_triton_settings_by_name_are_refused():
    source = "import os\nos.environ['HELION_INTERPRET'] = '1'\n" + candidate()
    assert rules(source) == [
        ("settings", "names the setting 'HELION_INTERPRET': Helion and Triton settings are the verifier's")
    ]


def test_the_common_rules_still_apply():
    source = candidate(body="double(x)").replace("import torch\n", "import torch\nimport gc\n", 1)
    assert [r for r, _ in rules(source)] == ["forbidden-import"]


def test_unparsable_source_is_left_to_the_format_check():
    assert rules(candidate(body="double(x")) == []

"""Static checks: one test per rule, and no false positives on ordinary kernel code."""

import pytest

from kernelzero.verify.static import check_candidate, check_cpp, check_python

CLEAN_TRITON = """
import math
import os
import torch
import torch.nn as nn
import triton
import triton.language as tl

os.environ.setdefault("TRITON_PRINT_AUTOTUNING", "0")


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))
        setup = {"a": 1}

    def forward(self, x):
        try:
            y = torch.empty_like(x)
        except RuntimeError:
            y = torch.zeros_like(x)
        k[(1,)](x, x.numel(), BLOCK=16)
        return y
"""


def rules(source):
    return [v.rule for v in check_python(source)]


def test_clean_candidate_has_no_violation():
    assert check_candidate(CLEAN_TRITON, "triton") == []


@pytest.mark.parametrize(
    "snippet, rule",
    [
        ("import gc\n", "forbidden-import"),
        ("import inspect as ins\n", "forbidden-import"),
        ("from ctypes import CDLL\n", "forbidden-import"),
        ("import threading\n", "forbidden-import"),
        ("import subprocess\n", "forbidden-import"),
        ("from os import _exit\n", "forbidden-import"),
        ("import sys\nf = sys._getframe(1)\n", "introspection"),
        ("import sys\nm = sys.modules['torch']\n", "introspection"),
        ("def f(fr):\n    return fr.f_back.f_locals\n", "introspection"),
        ("x = object.__subclasses__()\n", "introspection"),
        ("import os\nos._exit(0)\n", "introspection"),
        ("import torch\nfut = torch.jit._fork(torch.relu, x)\n", "introspection"),
        ("import os\nos.write(3, b'x')\n", "process-control"),
        ("import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.001\n", "monkeypatch"),
        ("import time\ntime.perf_counter = lambda: 0\n", "monkeypatch"),
        ("import torch as T\nT.allclose = lambda *a, **k: True\n", "monkeypatch"),
        ("setattr(torch, 'allclose', None)\n", "dynamic-code"),
        ("exec('x = 1')\n", "dynamic-code"),
        ("m = __import__('gc')\n", "dynamic-code"),
        ("open('torch.py', 'w').write('')\n", "file-write"),
        ("class ModelNew(Model):\n    pass\n", "reference-use"),
        ("y = Model()(x)\n", "reference-use"),
        ("try:\n    launch()\nexcept Exception:\n    y = torch.nn.functional.gelu(x)\n", "fallback"),
    ],
)
def test_each_python_rule(snippet, rule):
    assert rule in rules(snippet), check_python(snippet)


def test_violations_carry_line_numbers():
    (v,) = check_python("x = 1\nimport gc\n")
    assert v.line == 2 and "gc" in v.message


@pytest.mark.parametrize(
    "cpp, word",
    [
        ("void f() { std::thread t([]{}); t.detach(); }", "thread"),
        ("void f() { cudaStream_t s; cudaStreamCreate(&s); }", "stream"),
        ("#define MK(a, b) a##b\nvoid f() { cudaStream_t s; MK(cudaStream, Create)(&s); }", "stream"),
        ("#define SPAWN std::thread\nvoid f() { SPAWN t([]{}); }", "thread"),
        ("void f() { at::launch([]{}); }", "thread"),  # torch's inter-op pool: a thread all the same
        ("void f(cudaStream_t s) { cudaLaunchHostFunc(s, g, nullptr); }", "thread"),
        ('void f() { system("ls"); }', "OS"),
        ("void f() { exit(0); }", "exits"),
    ],
)
def test_cpp_rules_see_through_macros(cpp, word):
    found = check_cpp([cpp])
    assert found and word in found[0].message


def test_plain_cuda_kernel_is_clean():
    cuda = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#define BLOCK 256
__global__ void k(const float* x, float* y, int n) { int i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x);
  k<<<(x.numel() + BLOCK - 1) / BLOCK, BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y; }
"""
    assert check_cpp([cuda]) == []


def test_backend_needs_its_kernel_construct():
    assert [v.rule for v in check_candidate("class ModelNew: pass\n", "triton")] == ["no-kernel"]
    assert [v.rule for v in check_candidate("class ModelNew: pass\n", "cuda")] == ["no-kernel"]

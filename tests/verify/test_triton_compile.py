"""Tests for kernelzero.verify.backends.triton.compile: compiling every launch for sm_90 without a GPU.

The stub driver is process-wide and non-interpreted ``@triton.jit`` needs its source in a file, so
the candidate below is written to a .py file and all scenarios run in one fresh subprocess
(``TRITON_INTERPRET`` unset, a fresh ``TRITON_CACHE_DIR``); each test checks its part of the JSON
that subprocess writes.

Run: ``PYTHONPATH=src .venv/bin/python -m pytest tests/verify/test_triton_compile.py -q``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

CANDIDATE = r"""
import torch, triton
import triton.language as tl


@triton.jit
def add(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def dot_8x8x8(a, b, c, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(a + r[:, None] * B + r[None, :])
    y = tl.load(b + r[:, None] * B + r[None, :])
    tl.store(c + r[:, None] * B + r[None, :], tl.dot(x, y))


@triton.jit
def typo(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, tl.lod(x + offs), mask=offs < n)


@triton.jit
def libdevice_tanh(x, o, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.extra.cuda.libdevice.tanh(tl.load(x + offs, mask=m)), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 256}, num_warps=4)],
                 key=["n"])
@triton.jit
def tuned_double(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def forward():
    n = 1000
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    for _ in range(3):
        add[(triton.cdiv(n, 256),)](x, y, o, n, BLOCK=256, num_warps=8)
    h = torch.randn(64, 128, dtype=torch.float16)
    matmul[(1,)](h, h.t().contiguous(), torch.empty(64, 64), 128, BM=64, BN=64, BK=32, num_stages=3)
    s = torch.randn(8, 8)
    dot_8x8x8[(1,)](s, s, s, B=8)
    typo[(1,)](x, n, BLOCK=16)
    libdevice_tanh[(1,)](x, o, n, BLOCK=1024)
    tuned_double[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, o, n)
    return o
"""

SCENARIOS = r"""
import dataclasses, importlib.util, json, os, sys
from pathlib import Path
from triton.runtime.driver import driver
from kernelzero.verify.backends.triton.compile import compile_launches

spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
candidate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(candidate)

results = {"records": [dataclasses.asdict(r) for r in compile_launches(candidate.forward)]}
results["driver_restored"] = getattr(driver, "_active", "missing") is None
os.environ["TRITON_INTERPRET"] = "1"
try:
    compile_launches(candidate.forward)
    results["interpret_refused"] = ""
except RuntimeError as e:
    results["interpret_refused"] = str(e)
Path(sys.argv[2]).write_text(json.dumps(results))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("compile")
    (tmp / "candidate.py").write_text(CANDIDATE)
    (tmp / "scenarios.py").write_text(SCENARIOS)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(SRC), TRITON_CACHE_DIR=str(tmp / "cache"))
    proc = subprocess.run(
        [sys.executable, str(tmp / "scenarios.py"), str(tmp / "candidate.py"), str(tmp / "out.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((tmp / "out.json").read_text())


def records_of(results: dict, kernel: str) -> list[dict]:
    return [r for r in results["records"] if r["kernel"] == kernel]


def test_good_kernel_compiles_once_with_resource_numbers(results: dict) -> None:
    [add] = records_of(results, "add")  # three launches, one specialization
    assert add["ok"] and add["error"] == "" and add["shared_bytes"] == 0
    assert "BLOCK=256" in add["config"] and "num_warps=8" in add["config"]
    assert add["compile_seconds"] > 0


def test_matmul_reports_shared_memory_and_registers(results: dict) -> None:
    [mm] = records_of(results, "matmul")
    assert mm["ok"], mm["error"]
    assert mm["shared_bytes"] > 0 and "num_stages=3" in mm["config"]
    assert mm["registers"] is None or mm["registers"] > 0  # cuobjdump is optional


def test_dot_with_k_below_16_fails_to_compile(results: dict) -> None:
    [dot] = records_of(results, "dot_8x8x8")
    assert not dot["ok"] and "K >= 16" in dot["error"]
    assert dot["error"].count("\n") < 40 and len(dot["error"]) <= 4010


def test_typo_in_tl_name_fails_to_compile(results: dict) -> None:
    [typo] = records_of(results, "typo")
    assert not typo["ok"] and "has no attribute 'lod'" in typo["error"]


def test_libdevice_tanh_compiles(results: dict) -> None:
    [tanh] = records_of(results, "libdevice_tanh")
    assert tanh["ok"], tanh["error"]


def test_autotune_compiles_every_config(results: dict) -> None:
    tuned = records_of(results, "tuned_double")
    assert sorted(r["config"].split()[0] for r in tuned) == ["BLOCK=256", "BLOCK=64"]
    assert all(r["ok"] for r in tuned)


def test_stub_driver_is_removed_afterwards(results: dict) -> None:
    assert results["driver_restored"] is True


def test_interpreter_mode_is_refused(results: dict) -> None:
    assert "TRITON_INTERPRET" in results["interpret_refused"]

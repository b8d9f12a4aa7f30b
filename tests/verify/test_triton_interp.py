"""Tests for kernelzero.verify.backends.triton.interp: bounds checks, device asserts, launch counts, bf16 flag.

The interpreter is chosen when ``@triton.jit`` runs and the guards patch process-wide state, so all
kernel scenarios run in one fresh subprocess with ``TRITON_INTERPRET=1`` (one import of torch+triton);
each test then checks its own case in the JSON that subprocess writes.

Run: ``PYTHONPATH=src .venv/bin/python -m pytest tests/verify/test_triton_interp.py -q``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelzero.verify.backends.triton.interp import padded_clone

SRC = Path(__file__).resolve().parents[2] / "src"

SCENARIOS = r"""
import json, sys
from pathlib import Path
import torch, triton
import triton.language as tl
from triton.runtime import interpreter
from kernelzero.verify.backends.triton import interp as triton_interp
from kernelzero.verify.backends.triton.interp import install_guards, padded_clone as P

results = {}

# A missing internal (as a Triton version might lack) is named, and nothing is patched.
saved = interpreter.InterpreterBuilder.create_atomic_cas
del interpreter.InterpreterBuilder.create_atomic_cas
try:
    install_guards()
    results["missing_internal"] = "installed anyway"
except triton_interp.InterpreterInternalsError as e:
    results["missing_internal"] = str(e)
interpreter.InterpreterBuilder.create_atomic_cas = saved

log = install_guards()


def attempt(name, launch):
    log.reset()
    try:
        ok = launch()
        results[name] = {"error": None, "ok": ok, "counts": dict(log.counts), "bf16": log.saw_bf16}
    except Exception as e:
        results[name] = {"error": str(e), "ok": None, "counts": dict(log.counts), "bf16": log.saw_bf16}


@triton.jit
def add(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def add_no_mask(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o + offs, tl.load(x + offs) + tl.load(y + offs))


@triton.jit
def add_store_unmasked(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(x + offs, mask=m, other=0.) + tl.load(y + offs, mask=m, other=0.))


@triton.jit
def add_off_by_one(x, y, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs <= n
    tl.store(o + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@triton.jit
def copy_through_int(x, o, n, BLOCK: tl.constexpr):
    # the int round trip loses provenance: only "inside some argument" can be checked
    offs = tl.arange(0, BLOCK)
    xp = x.to(tl.uint64).to(tl.pointer_type(tl.float32))
    tl.store(o + offs, tl.load(xp + offs), mask=offs < n)


@triton.jit
def transpose_copy(x, o, R, C, sxr, sxc, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.arange(0, BR)[:, None]
    c = tl.arange(0, BC)[None, :]
    m = (r < R) & (c < C)
    tl.store(o + r * C + c, tl.load(x + r * sxr + c * sxc, mask=m), mask=m)


@triton.jit
def block_ptr_no_check(x, M, N, BM: tl.constexpr, BN: tl.constexpr):
    p = tl.make_block_ptr(x, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    tl.store(p, tl.load(p) + 1)


@triton.jit
def atomic_past_end(c, n, BLOCK: tl.constexpr):
    tl.atomic_add(c + tl.arange(0, BLOCK), 1.0)


@triton.jit
def assert_small(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.)
    tl.device_assert(v < 5, "value too big")


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def tuned_double(x, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


n = 1000
x, y, o = P(torch.randn(n)), P(torch.randn(n)), P(torch.zeros(n))
grid = (triton.cdiv(n, 256),)


def masked_add():
    add[grid](x, y, o, n, BLOCK=256)
    return bool(torch.equal(o, x + y))


def add_three_times_then_fail():
    for _ in range(3):
        add[grid](x, y, o, n, BLOCK=256)
    try:
        add[grid](x, y, o, BLOCK=256)  # missing n: raises before any program runs
    except TypeError:
        pass
    try:
        add_no_mask[grid](x, y, o, n, BLOCK=256)  # raises while running
    except Exception:
        pass
    return True


def neighbour_views():
    buf = torch.randn(32)
    a, b = buf[:16], buf[16:]  # b starts where a ends
    add_no_mask[(1,)](a, a, b, 16, BLOCK=32)


def int_roundtrip(pad):
    buf = torch.randn(32)
    a, b = buf[:16], buf[16:]
    if pad:
        a, b = P(a), P(b)
    copy_through_int[(1,)](a, b, 16, BLOCK=32)
    return True


def strided_view():
    src = P(torch.randn(6, 8)).t()  # 8 x 6 view, strides (1, 8)
    out = P(torch.zeros(8, 6))
    transpose_copy[(1,)](src, out, 8, 6, src.stride(0), src.stride(1), BR=8, BC=8)
    return bool(torch.equal(out, src))


def bf16_copy():
    xb, ob = P(torch.randn(10, dtype=torch.bfloat16)), P(torch.zeros(10, dtype=torch.bfloat16))
    add[(1,)](xb, xb, ob, 10, BLOCK=16)
    return True


def autotuned():
    tuned_double[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, o, n)
    return bool(torch.equal(o, x * 2))


attempt("masked_add", masked_add)
attempt("unmasked_load", lambda: add_no_mask[grid](x, y, o, n, BLOCK=256))
attempt("unmasked_store", lambda: add_store_unmasked[grid](x, y, o, n, BLOCK=256))
attempt("off_by_one", lambda: add_off_by_one[grid](x, y, o, n, BLOCK=256))
attempt("neighbour_views", neighbour_views)
attempt("int_roundtrip_adjacent", lambda: int_roundtrip(False))
attempt("int_roundtrip_padded", lambda: int_roundtrip(True))
attempt("strided_view", strided_view)
attempt("block_ptr", lambda: block_ptr_no_check[(1,)](P(torch.zeros(10, 10)), 10, 10, BM=16, BN=16))
attempt("atomic", lambda: atomic_past_end[(1,)](P(torch.zeros(8)), 8, BLOCK=16))
attempt("device_assert", lambda: assert_small[(1,)](P(torch.arange(10.)), 10, BLOCK=16))
attempt("launch_counts", add_three_times_then_fail)
attempt("bf16", bf16_copy)
attempt("fp32_after_bf16", masked_add)
attempt("autotune", autotuned)
Path(sys.argv[1]).write_text(json.dumps(results))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("interp")
    script, out = tmp / "scenarios.py", tmp / "results.json"
    script.write_text(SCENARIOS)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(SRC), "TRITON_CACHE_DIR": str(tmp / "cache")}
    proc = subprocess.run([sys.executable, str(script), str(out)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_missing_interpreter_internal_is_named(results: dict) -> None:
    assert "InterpreterBuilder.create_atomic_cas" in results["missing_internal"]


def test_masked_add_passes_without_violation(results: dict) -> None:
    case = results["masked_add"]
    assert case["error"] is None and case["ok"] is True
    assert case["counts"] == {"add": 1}


def test_unmasked_load_past_end_is_caught(results: dict) -> None:
    error = results["unmasked_load"]["error"]
    assert "out-of-bounds load: 24 of 256 active lane(s)" in error
    assert "program_id=(3, 0, 0)" in error and "element 1000" in error


def test_unmasked_store_past_end_is_caught(results: dict) -> None:
    assert "out-of-bounds store: 24 of 256 active lane(s)" in results["unmasked_store"]["error"]


def test_off_by_one_mask_is_caught(results: dict) -> None:
    error = results["off_by_one"]["error"]
    assert "out-of-bounds load: 1 of 233 active lane(s)" in error and "program_id=(3, 0, 0)" in error


def test_overrun_into_neighbouring_view_is_caught_by_provenance(results: dict) -> None:
    assert "out-of-bounds load: 16 of 32 active lane(s) outside argument 'x'" in results["neighbour_views"]["error"]


def test_overrun_without_provenance_is_caught_thanks_to_padding(results: dict) -> None:
    # Adjacent buffers: the overrun lands inside the other argument, which the weak check accepts.
    assert results["int_roundtrip_adjacent"]["error"] is None
    assert "outside every tensor argument" in results["int_roundtrip_padded"]["error"]


def test_strided_view_within_its_span_passes(results: dict) -> None:
    assert results["strided_view"]["error"] is None and results["strided_view"]["ok"] is True


def test_block_pointer_without_boundary_check_is_caught(results: dict) -> None:
    assert "out-of-bounds load" in results["block_ptr"]["error"]


def test_atomic_past_end_is_caught(results: dict) -> None:
    assert "out-of-bounds atomic_rmw: 8 of 16 active lane(s)" in results["atomic"]["error"]


def test_device_assert_fires(results: dict) -> None:
    error = results["device_assert"]["error"]
    assert "value too big" in error and "program_id=(0, 0, 0)" in error


def test_launch_counts_only_completed_launches(results: dict) -> None:
    case = results["launch_counts"]
    assert case["error"] is None
    assert case["counts"] == {"add": 3}  # the missing-argument launch and the out-of-bounds one do not count


def test_bf16_argument_is_flagged(results: dict) -> None:
    assert results["bf16"]["bf16"] is True
    assert results["fp32_after_bf16"]["bf16"] is False  # reset() clears it


def test_autotune_runs_every_config_and_counts_one_launch(results: dict) -> None:
    case = results["autotune"]
    assert case["error"] is None and case["ok"] is True
    assert case["counts"] == {"tuned_double": 1}


def test_padded_clone_is_contiguous_copy_between_gaps() -> None:
    src = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # strided input
    out = padded_clone(src, guard_bytes=4096)
    assert out.is_contiguous() and out.shape == src.shape and torch.equal(out, src)
    storage = out.untyped_storage()
    before = out.data_ptr() - storage.data_ptr()
    after = storage.data_ptr() + storage.nbytes() - (out.data_ptr() + out.numel() * out.element_size())
    assert before >= 4096 and after >= 4096
    assert out.data_ptr() % 64 == 0

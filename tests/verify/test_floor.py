"""The judge's floor (judge/floor.py, worker/floor.py): its size, when it replaces the clock check and by how much
it raises a candidate's time (CPU); on a GPU, that a candidate's reported time never ends below it (issue 26)."""

from __future__ import annotations

import pytest
import torch

from kernelzero.types import Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.judge.floor import FLOOR_CALLS, FLOOR_TOLERANCE, LONG_ENOUGH, apply_floor, floor_calls

MIB = 1 << 20


def test_a_floor_batch_fills_its_gpu_time_within_one_blocks_bytes():
    # a 0.1 ms call on 1 MiB sets: 200 calls reach 20 ms, and 256 MiB holds 51 (sets, placeholders, staged copies,
    # outputs twice)
    assert floor_calls(MIB, MIB, 0.1, 256 * MIB) == 51
    # a 1 ms call on small sets: 20 calls are enough
    assert floor_calls(1024, 1024, 1.0, 256 * MIB) == 20
    # a 4 us call on tiny sets: the count's own bound
    assert floor_calls(64, 64, 0.004, 256 * MIB) == FLOOR_CALLS
    # a set larger than the block: one call all the same
    assert floor_calls(512 * MIB, 512 * MIB, 0.1, 256 * MIB) == 1


def _floor(cand_ms: float, calls: int, round_trip_ms: float) -> dict:
    return {
        "cand_ms": cand_ms,
        "ref_ms": 0.0,
        "calls": calls,
        "round_trip_ms": round_trip_ms,
        "batch_ms": cand_ms * calls,
    }


def test_the_floor_decides_only_when_its_batch_dwarfs_the_judges_round_trip():
    times = [0.1] * 10
    assert apply_floor(times, "median", None) is None
    # 20 calls of 0.1 ms against a 0.3 ms round trip: 2 ms is under LONG_ENOUGH round trips, the clock check decides
    assert apply_floor(times, "median", _floor(0.1, 20, 0.3)) is None
    assert 200 * 0.1 >= LONG_ENOUGH * 0.3
    extra, words = apply_floor(times, "median", _floor(0.1, 200, 0.3))
    assert extra == 0.0 and words.startswith("confirmed by the judge's floor")


def test_a_time_reported_under_the_floor_is_raised_to_it_and_noise_within_the_tolerance_is_not():
    times = [0.01, 0.02, 0.02, 0.03, 0.5]  # median 0.02 ms, mean 0.116 ms
    extra, words = apply_floor(times, "median", _floor(0.1, 500, 0.3))
    assert extra == pytest.approx(0.08) and words.startswith("raised to the judge's floor")
    assert "100.0 us a call over 500 calls" in words and "reported 20.0 us" in words
    # the kernelbench profile's statistic is the mean
    extra, _ = apply_floor(times, "mean", _floor(0.1, 500, 0.3))
    assert extra == 0.0
    # a floor within FLOOR_TOLERANCE over the statistic is noise
    extra, _ = apply_floor([0.1] * 5, "median", _floor(0.1 * (1 + FLOOR_TOLERANCE * 0.9), 500, 0.3))
    assert extra == 0.0
    extra, _ = apply_floor([0.1] * 5, "median", _floor(0.1 * (1 + FLOOR_TOLERANCE * 2), 500, 0.3))
    assert extra == pytest.approx(0.1 * FLOOR_TOLERANCE * 2)


HEAVY_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1024, 1024) / 32)

    def forward(self, x):
        for _ in range(16):
            x = torch.tanh(x @ self.w)
        return x

def get_inputs():
    return [torch.randn(256, 1024)]

def get_init_inputs():
    return []
"""

CANDIDATE = """
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    tl.store(out_ptr + offs, tl.where(x < 0, -t, t), mask=mask)


def _rerecord_start():
    frame = sys._getframe(1)
    while frame is not None:
        names = frame.f_locals
        if "starts" in names and "k" in names and "stream" in names:
            names["starts"][names["k"]].record(names["stream"])
            return
        frame = frame.f_back


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1024, 1024) / 32)

    def forward(self, x):
        for _ in range(15):
            x = torch.tanh(x @ self.w)
        y = (x @ self.w).contiguous()
        out = torch.empty_like(y)
        tanh_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        if CHEAT:
            _rerecord_start()
        return out
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("cheat", [False, True])
def test_a_reported_time_never_ends_below_the_judges_floor(cheat):
    """Small sets, 16 matmuls a call (about 0.2 ms): the floor batch (51 calls) is long enough to decide. The cheat re-records its start event
    after its launches (its events hold nothing of its work) and is raised to what the judge's clock saw; the honest
    one is confirmed. Either way the candidate's time is at least the floor, within its tolerance."""
    task = Task(name="floor/heavy_small_sets", source=HEAVY_TASK)
    opts = options_for(device="cuda", policy="kernelbench", static_checks=False)
    verdict = verify(task, CANDIDATE.replace("CHEAT", str(cheat)), "triton", opts)
    assert verdict.status == "correct", (verdict.status, verdict.message)
    floor = verdict.stage_seconds.get("floor_cand_ms")
    assert floor is not None and floor > 0, verdict.notes
    assert verdict.timing.median_ms * (1 + FLOOR_TOLERANCE) >= floor
    expected = "raised to the judge's floor" if cheat else "confirmed by the judge's floor"
    assert verdict.timing_check.startswith(expected), verdict.timing_check
    assert 0.7 <= verdict.speedup_eager <= 1.3  # the same work as the reference's, whatever it reported

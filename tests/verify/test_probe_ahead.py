"""The health probe started ahead (verify/judge/probe.py `start_probe`, lease.py `probe_ahead`): its process is made
before the taker passes the turnstile and checks only when told, one taker at a time starts one, an unused one is
dismissed, and what a cold probe decides the started one decides too. On the CPU (`PROBE_ON = "cpu"`): the same
processes and locks, the checks on the CPU."""

from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest
from test_lease import locked

from kernelzero.verify.judge import lease
from kernelzero.verify.judge.probe import start_probe
from kernelzero.verify.sandbox import zygote_client


@pytest.fixture
def cpu_lease(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "LOCK_DIR", tmp_path)
    monkeypatch.setattr(lease, "PROBE_ON", "cpu")
    lease.probe_log.clear()
    return lease


def test_a_probe_started_ahead_checks_only_when_told_and_a_dismissed_one_ends():
    started = start_probe(None, "cpu")
    assert started is not None and started.ready_s > 0
    time.sleep(0.3)
    assert started.proc.poll() is None  # ready, waiting for the word
    result = started.run()
    assert result.ok and result.seconds < started.ready_s + 30, result
    started.dismiss()
    unused = start_probe(None, "cpu")
    unused.dismiss()
    assert unused.proc.poll() == 0  # the end of its stdin ends it, unchecked


def test_a_probe_that_cannot_get_ready_gives_none():
    if _gpu():
        pytest.skip("needs a machine without a CUDA GPU: the probe's context cannot be made there")
    assert start_probe(None, "cuda", timeout_s=120) is None  # the caller then probes cold, once it holds the lease


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_a_suspect_gpu_is_probed_by_a_probe_started_before_the_turnstile(cpu_lease):
    cpu_lease.mark_suspect("gpu-p")
    turn = os.open(cpu_lease.turn_path("gpu-p"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(turn, fcntl.LOCK_EX)  # a timer holds the turnstile: the taker waits there
    took: list = []
    taker = threading.Thread(target=lambda: took.append(_hold_briefly(cpu_lease)), daemon=True)
    taker.start()
    claim = cpu_lease.LOCK_DIR / "gpu-p.probing"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not locked(claim):
        time.sleep(0.05)
    assert locked(claim)  # it claimed the probe before it got the turnstile
    assert cpu_lease.probe_ahead("gpu-p") is None  # a second taker does not start another
    time.sleep(0.5)
    assert took == [] and cpu_lease.suspect_path("gpu-p").exists()  # nothing checked before the lease
    fcntl.flock(turn, fcntl.LOCK_UN)
    os.close(turn)
    taker.join(60)
    assert took == [True] and not cpu_lease.suspect_path("gpu-p").exists()
    note = cpu_lease.probe_note()
    assert note.startswith("the GPU passed a health probe") and "started ahead" in note, note
    assert not locked(claim)  # given back


def test_a_probe_started_ahead_but_not_needed_is_dismissed(cpu_lease, monkeypatch):
    cpu_lease.mark_suspect("gpu-q")
    ahead = cpu_lease.probe_ahead("gpu-q")
    assert ahead is not None
    cpu_lease.suspect_path("gpu-q").unlink()  # another holder probed meanwhile
    cpu_lease._probe_if_suspect("gpu-q", ahead[0])
    assert cpu_lease.probe_log == []  # no second probe
    ahead[0].dismiss()
    os.close(ahead[1])
    assert ahead[0].proc.poll() == 0


def test_a_probe_started_ahead_that_did_not_check_is_no_pass(cpu_lease, monkeypatch):
    cpu_lease.mark_suspect("gpu-r")
    monkeypatch.setenv(zygote_client.SWITCH_ENV, "0")  # a cold interpreter, as where there is no fork server
    ahead = cpu_lease.probe_ahead("gpu-r")
    assert ahead is not None
    ahead[0].proc.stdin.write(b"not go\n")  # a word other than `go`: it ends unchecked, which is no pass
    ahead[0].proc.stdin.flush()
    with pytest.raises(cpu_lease.GpuUnhealthy):
        cpu_lease._probe_if_suspect("gpu-r", ahead[0])
    assert cpu_lease.suspect_path("gpu-r").exists()
    os.close(ahead[1])


def _hold_briefly(lease_module) -> bool:
    with lease_module.gpu_lease("gpu-p", shared=True):
        return True

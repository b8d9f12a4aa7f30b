"""A health probe that finds no memory is inconclusive, not a failed GPU (verify/judge/probe_child.py, lease.py).

On the H200 gate (2026-12-03) a probe after a deliberate crash found the GPU's memory leased out by 15 other tests and
five honest samples became `infra_error`. Out of memory, the probe says `busy`; the holder goes on and the mark stays
for the next holder to probe again; any other failure still stops the GPU's use."""

from __future__ import annotations

import subprocess
import sys

from kernelzero.verify.judge import lease
from kernelzero.verify.judge.probe import ProbeResult
from kernelzero.verify.sandbox.process import source_root

# the probe's own code, in a process whose address space ends just past what it uses after importing torch
STARVED = """
import resource, sys, torch
from kernelzero.verify.judge.probe_child import main
size = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 10), resource.RLIM_INFINITY))
sys.exit(main(["cpu"]))
"""


def test_a_probe_without_memory_says_busy_and_a_fed_one_ok():
    env = {"PYTHONPATH": str(source_root()), "PATH": "/usr/bin:/bin"}
    starved = subprocess.run([sys.executable, "-c", STARVED], env=env, capture_output=True, text=True, timeout=120)
    assert starved.returncode == 3 and starved.stdout.startswith("probe busy"), (starved.stdout, starved.stderr[-800:])
    fed = subprocess.run(
        [sys.executable, "-m", "kernelzero.verify.judge.probe_child", "cpu"], env=env, capture_output=True, text=True
    )
    assert fed.returncode == 0 and "probe ok" in fed.stdout


def test_a_busy_probe_lets_the_holder_go_on_and_keeps_the_mark(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "LOCK_DIR", tmp_path)
    lease.mark_suspect("gpu-x")
    results = iter([ProbeResult(False, 0.1, "probe busy: out of memory", busy=True), ProbeResult(False, 0.1, "bad")])
    monkeypatch.setattr(lease, "probe_gpu", lambda *a, **k: next(results))
    lease._probe_if_suspect("gpu-x")  # busy: no exception
    assert lease.suspect_path("gpu-x").exists()  # the next holder probes again
    assert "inconclusive" in lease.probe_note()
    try:
        lease._probe_if_suspect("gpu-x")  # a real failure still stops the GPU's use
    except lease.GpuUnhealthy as exc:
        assert "bad" in str(exc)
    else:
        raise AssertionError("a failed probe did not raise")


def test_a_probe_is_forked_by_the_fork_server_where_there_is_one(monkeypatch):
    import os

    import pytest

    from kernelzero.verify.judge.probe import probe_gpu
    from kernelzero.verify.sandbox import zygote_client

    if os.geteuid() != 0:
        pytest.skip("the fork server runs as root")
    monkeypatch.setenv(zygote_client.SOCKET_ENV, zygote_client.address(wait_s=120))  # as a judge's environment has it
    forked = probe_gpu(None, device="cpu")
    assert forked.ok and forked.forked, forked
    monkeypatch.setenv(zygote_client.SWITCH_ENV, "0")
    cold = probe_gpu(None, device="cpu")
    assert cold.ok and not cold.forked, cold

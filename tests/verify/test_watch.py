"""The first filter out of the candidate's reach (issue 25, item 4): replies the judge can authenticate
(sandbox/channel.py), ops attributed by who called, host compute and probes reported (worker/watch.py), and watched
calls that look like timed ones from inside. The cheat fixtures relay_rewrite_reply, hook_compute_prerun,
numpy_host_compute, probe_dispatch_stack and probe_own_timing check the same through the verifier (test_cheats.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernelzero.verify.sandbox.channel import _write_frame, recv_msg, send_msg
from kernelzero.verify.sandbox.channel_auth import Authenticator, ForgedReply, signed_writer

SRC = Path(__file__).resolve().parents[2] / "src"


def test_tagged_replies_pass_and_rewritten_replayed_or_untagged_ones_do_not():
    key = os.urandom(32)
    auth = Authenticator()
    auth.arm(key)
    r, w = os.pipe()
    try:
        writer = signed_writer(w, key)
        send_msg(writer, {"ok": True, "launches": {"k": 1}}, [torch.arange(4.0)])
        header, tensors = recv_msg(r, auth=auth)
        assert header.pop("_cpu_s") > 0  # every reply says its process's CPU seconds (a diagnosis)
        assert header == {"ok": True, "launches": {"k": 1}} and torch.equal(tensors[0], torch.arange(4.0))

        # a relay that rewrites the header (and keeps the tag) is refused
        tagged = []
        relay_r, relay_w = os.pipe()
        send_msg(signed_writer(relay_w, key), {"ok": True, "torch_ops": ["gelu"]})  # what the worker wrote
        n = int.from_bytes(os.read(relay_r, 8), "little")
        tagged.append(os.read(relay_r, n))
        os.close(relay_r), os.close(relay_w)
        forged = tagged[0].replace(b'["gelu"]', b"[]")
        _write_frame(w, forged)
        with pytest.raises(ForgedReply):
            recv_msg(r, auth=auth)

        # a reply replayed under a later sequence number, and an untagged one, are refused too
        fresh = Authenticator()
        fresh.arm(key)
        writer = signed_writer(w, key)
        send_msg(writer, {"ok": True, "n": 0})
        first = os.read(r, 1 << 16)
        os.write(w, first)
        os.write(w, first)  # the same bytes again: sequence number 0 where 1 is due
        assert {k: v for k, v in recv_msg(r, auth=fresh)[0].items() if k != "_cpu_s"} == {"ok": True, "n": 0}
        with pytest.raises(ForgedReply):
            recv_msg(r, auth=fresh)
        send_msg(w, {"ok": True})  # plain, as before the key
        with pytest.raises(ForgedReply):
            recv_msg(r, auth=fresh)
    finally:
        os.close(r), os.close(w)


def _run(tmp_path: Path, user_module: str, driver: str, env: dict | None = None) -> dict:
    """Run `driver` in a fresh interpreter with `user_module` importable as `user` from tmp_path (a file outside
    every library folder: user code, as a candidate's module is); the driver prints one JSON line last."""
    (tmp_path / "user.py").write_text(textwrap.dedent(user_module))
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(driver))
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}", **(env or {})},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# The driver lives in kernelzero's stead: it sets up the guards as the worker does and runs the user module's
# functions on the candidate's thread, once as a watched call (the op recorder) and once as a timed call.
DRIVER_HEAD = """
import json, sys
import torch
from kernelzero.verify.worker.guards import Guards
from kernelzero.verify.worker.seal import CleanRunner

guards = Guards(warm=False)
runner = CleanRunner()
import user
guards.watch.armed = guards.watch.in_forward = True

def call(fn, *args, watched):
    with guards.observe(record_ops=watched) as modes:
        value = runner.run(fn, *args, modes=(torch.no_grad(), *modes))
    guards.watch.end_call(1)
    host, probes = guards.watch.take()
    return value, sorted(set(guards.last_ops) | set(host)), probes
"""


def test_watched_and_timed_calls_look_the_same_and_probes_are_reported(tmp_path):
    user = """
    import sys, threading, time, torch

    def observe():
        return {
            "thread": threading.get_ident(),
            "profile": repr(sys.getprofile()),
            "trace": repr(sys.gettrace()),
            "grad": torch.is_grad_enabled(),
            "function_modes": torch._C._len_torch_function_stack(),
            "dispatch_modes": torch._C._len_torch_dispatch_stack(),
            "clock": time.perf_counter() > 0,
        }

    def quiet():
        return threading.get_ident()
    """
    driver = (
        DRIVER_HEAD
        + """
seen = {}
for watched in (True, False):
    value, ops, probes = call(user.observe, watched=watched)
    quiet, _, quiet_probes = call(user.quiet, watched=watched)
    seen[str(watched)] = {"obs": value, "probes": probes, "quiet_probes": quiet_probes, "quiet": quiet}
print(json.dumps(seen))
"""
    )
    seen = _run(tmp_path, user, driver)
    watched, timed = seen["True"], seen["False"]
    # what differs in one process (the recorder is a dispatch mode on watched calls) is reported when asked ...
    assert watched["obs"]["dispatch_modes"] != timed["obs"]["dispatch_modes"]
    for kind in (watched, timed):
        assert {"torch._C._len_torch_dispatch_stack", "torch._C._len_torch_function_stack"} <= set(kind["probes"])
        assert {"sys.getprofile", "sys.gettrace", "time.perf_counter"} <= set(kind["probes"])
        assert kind["quiet_probes"] == []  # a call that asks nothing is reported for nothing
    # ... and everything else is the same on both kinds of call: thread, trace hooks, grad mode, function modes
    same = {k: v for k, v in watched["obs"].items() if k != "dispatch_modes"}
    assert same == {k: v for k, v in timed["obs"].items() if k != "dispatch_modes"}
    assert watched["quiet"] == timed["quiet"]


def test_ops_are_attributed_to_who_called_and_host_compute_is_reported(tmp_path):
    user = """
    import ctypes
    import torch
    import torch.nn.functional as F
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

    @triton.jit
    def hooked_kernel(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.load(src + offs, mask=offs < n)

    hooked_kernel.add_pre_run_hook(lambda src, dst, *a, **k: dst.copy_(F.gelu(src)))

    def launch(kernel, x, grid=None):
        out = torch.empty_like(x)
        kernel[grid or (4,)](x, out, x.numel(), BLOCK=64)
        return out

    def launch_plain(x):
        return launch(copy_kernel, x)

    def launch_hooked(x):
        return launch(hooked_kernel, x)

    def launch_grid_compute(x):
        return launch(copy_kernel, x, grid=lambda meta: (int(torch.mm(x[:4, None], x[None, :4]).numel() > 0) * 4,))

    def numpy_compute(x):
        return torch.from_numpy(x.numpy() * 2)

    def list_compute(x):
        return torch.tensor([v * 2 for v in x.tolist()])

    def scalar_reads(x):
        return [x[i].item() for i in range(32)]

    def few_scalar_reads(x):
        return [x[i].item() for i in range(2)]

    def ctypes_use(x):
        return ctypes.cast(0, ctypes.c_void_p)
    """
    driver = (
        DRIVER_HEAD
        + """
import triton
x = torch.randn(256)
found = {}
for name in ("launch_plain", "launch_hooked", "launch_grid_compute", "numpy_compute", "list_compute",
             "scalar_reads", "few_scalar_reads", "ctypes_use"):
    found[name] = {str(watched): call(getattr(user, name), x, watched=watched)[1] for watched in (True, False)}
print(json.dumps(found))
"""
    )
    found = _run(tmp_path, user, driver, env={"TRITON_INTERPRET": "1"})
    watched = {name: kinds["True"] for name, kinds in found.items()}
    timed = {name: kinds["False"] for name, kinds in found.items()}
    # Triton's own launch machinery (the interpreter's host copies) is not the candidate's compute ...
    assert watched["launch_plain"] == [] and watched["few_scalar_reads"] == []
    # ... but what the candidate hands to the launch is: a pre-run hook, a grid function
    assert "gelu" in watched["launch_hooked"]
    assert "mm" in watched["launch_grid_compute"]
    # host compute, on watched and timed calls alike (the wrappers are there on every call)
    for kind in (watched, timed):
        assert "host:Tensor.numpy" in kind["numpy_compute"] and "host:torch.from_numpy" in kind["numpy_compute"]
        assert "host:Tensor.tolist" in kind["list_compute"]
        assert "host:item" in kind["scalar_reads"]
        assert "host:ctypes" in kind["ctypes_use"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_copies_to_the_host_are_host_compute_on_a_gpu(tmp_path):
    user = """
    import torch

    def to_host(x):
        return (x.cpu() * 2).to(x.device)

    def on_device(x):
        return x * 2
    """
    driver = (
        DRIVER_HEAD
        + """
x = torch.randn(4096, device="cuda")
print(json.dumps({name: call(getattr(user, name), x, watched=True)[1] for name in ("to_host", "on_device")}))
"""
    )
    found = _run(tmp_path, user, driver)
    assert "host:copy_to_host" in found["to_host"]
    assert "host:copy_to_host" not in found["on_device"]

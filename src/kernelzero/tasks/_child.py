"""Child process of the contract check: `python -m kernelzero.tasks._child REQUEST.json RESULTS.jsonl`.

It imports torch once, then forks one grandchild per task (the grandchild runs the task's code; this
process never does), so each task starts from a clean interpreter state without paying torch's
import again. A grandchild that hangs is killed after the per-task timeout; one that dies (segfault,
`os._exit`) is reported as a crash. One JSON line per task is appended to RESULTS as soon as it is
known, so the parent can show progress and a crash of this process loses only the task in flight.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from kernelzero.tasks.module import ContractError, load_reference
from kernelzero.tasks.quality import degenerate_reasons, describe, flatten_outputs
from kernelzero.tasks.sizes import size_globals

MESSAGE_LIMIT = 600


def _seeded(seed: int, fn):
    torch.manual_seed(seed)
    return fn()


def _to(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _forward_ms(model, inputs, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    model(*inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


def check_one(req: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Run the contract check of one task in this process; raise ContractError on failure."""
    device = req["device"]
    sizes = req["sizes"]
    ref = load_reference(req["source"], sizes, workdir / "task.py")
    result: dict[str, Any] = {"sizes": {**size_globals(req["source"]), **sizes}}
    try:
        init_inputs = _seeded(req["seed"], ref.get_init_inputs)
    except Exception as exc:
        raise ContractError("bad_init_inputs", f"get_init_inputs() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(init_inputs, (list, tuple)):
        raise ContractError("bad_init_inputs", f"get_init_inputs() must return a list, got {describe(init_inputs)}")
    try:
        with torch.no_grad():
            model = _seeded(req["seed"], lambda: ref.model_cls(*init_inputs))
        model = model.eval().to(device)
    except Exception as exc:
        raise ContractError("init_failed", f"Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from exc
    draws = []
    for seed in (req["seed"] + 1, req["seed"] + 2):
        try:
            inputs = _seeded(seed, ref.get_inputs)
        except Exception as exc:
            raise ContractError("bad_inputs", f"get_inputs() raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(inputs, (list, tuple)) or not any(isinstance(x, torch.Tensor) for x in inputs):
            raise ContractError(
                "bad_inputs", f"get_inputs() must return a list holding tensors, got {describe(inputs)}"
            )
        draws.append(_to(list(inputs), device))
    result["input_shapes"] = [describe(x) for x in draws[0]]
    outs = []
    with torch.no_grad():
        for inputs in draws:
            try:
                raw = model(*inputs)
            except torch.OutOfMemoryError as exc:
                raise ContractError("oom", f"forward ran out of memory: {str(exc)[:200]}") from exc
            except Exception as exc:
                raise ContractError("forward_failed", f"forward raised {type(exc).__name__}: {exc}") from exc
            try:
                outs.append(flatten_outputs(raw))
            except TypeError as exc:
                raise ContractError("bad_output", str(exc)) from None
        result["output_shapes"] = [describe(o) for o in outs[0]]
        for out in outs[0]:
            if out.is_floating_point() and not torch.isfinite(out).all():
                raise ContractError("nonfinite_output", f"the reference output {describe(out)} holds NaN or Inf")
        again = flatten_outputs(model(*draws[0]))
        nondeterministic = [
            "the reference is not deterministic" for a, b in zip(outs[0], again) if not torch.equal(a, b)
        ][:1]
        result["degenerate"] = nondeterministic + degenerate_reasons(outs[0], outs[1], draws[0])
        result["forward_ms"] = _forward_ms(model, draws[0], device) if req["time_forward"] else None
    return result


def _grandchild(req: dict[str, Any], fd: int) -> None:
    os.setsid()
    with tempfile.TemporaryDirectory(prefix="kz-task-") as tmp:
        try:
            payload = {"ok": True, **check_one(req, Path(tmp))}
        except ContractError as exc:
            payload = {"ok": False, "error": exc.kind, "message": str(exc)[:MESSAGE_LIMIT]}
        except BaseException as exc:  # a bug in the check itself: report, never hang
            tail = traceback.format_exc()[-MESSAGE_LIMIT:]
            payload = {"ok": False, "error": "crash", "message": f"{type(exc).__name__}: {tail}"}
    os.write(fd, json.dumps(payload).encode())
    os.close(fd)


def _read_all(fd: int, deadline: float) -> bytes | None:
    chunks = []
    ready = select.poll()  # not select(): it fails on descriptors above 1023
    ready.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if ready.poll(math.ceil(left * 1000)):
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def run_task(req: dict[str, Any]) -> dict[str, Any]:
    """Fork a grandchild for one task; return its result, or a timeout / crash record."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        code = 0
        try:
            _grandchild(req, wfd)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(wfd)
    data = _read_all(rfd, time.monotonic() + req["timeout_s"])
    os.close(rfd)
    if data is None:
        _kill_group(pid)
        os.waitpid(pid, 0)
        return {"ok": False, "error": "timeout", "message": f"no result within {req['timeout_s']:.0f} s"}
    _, status = os.waitpid(pid, 0)
    _kill_group(pid)
    if data:
        return json.loads(data)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        return {"ok": False, "error": "crash", "message": f"the check process died from {sig}"}
    return {
        "ok": False,
        "error": "crash",
        "message": f"the check process exited ({os.WEXITSTATUS(status)}) without a result",
    }


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    with open(argv[1], "a") as results:
        for req in request["tasks"]:
            start = time.monotonic()
            result = run_task({**request["options"], **req})
            result["name"] = req["name"]
            result["seconds"] = time.monotonic() - start
            results.write(json.dumps(result) + "\n")
            results.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

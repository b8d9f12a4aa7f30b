"""Capture the `load_inline` builds of a CUDA candidate without building anything.

What: `capture_load_inline(path, timeout_s)` runs a candidate module in a fresh Python process in which
`torch.utils.cpp_extension.load_inline` only records its arguments, and returns them as `InlineBuild`s.
Each call returns a stand-in extension, so the import goes on and a candidate with several builds is
seen whole; calling into a stand-in raises a private BaseException that ends the import quietly.
`load` and `_jit_compile` are replaced too: nothing is ever built during a capture. This module also
holds the process helpers (`run_group`, `_scrubbed_env`, log and JSON readers) that `cuda_source.py`
uses to run the compilers.

Why: without a GPU the captured sources are all there is to check (`cuda_source.compile_check`), and
an import that fails before any build (syntax error, bad import) is itself the feedback a Coder needs:
`CaptureError` carries the exception type and the candidate's traceback tail.

How to run: through `python -m kernelzero.verify.backends.cuda.source CANDIDATE.py`, which captures, then
compile-checks each build; or `capture_load_inline(path, timeout_s)` from Python.

Protected: the candidate runs in a child process of its own session (the whole group is killed on
timeout), in its own temp dir with a scrubbed environment (PATH only; HOME/TMPDIR point to the temp dir;
no GPU visible), started with `python -I`; builds made after the import (in `__init__`/`forward`) are
not seen. With a `sandbox` plan (the verification pool's build stage) the child runs as the sandbox
user in an empty network namespace; without one, the candidate's import can read and write what this
user can (filesystem, network, memory). The child's folder is a sub-folder of one only this user can write (the
log stays outside it), and its result file is read only when it is a regular file, not through a link (a FIFO or
a link to another file in its place is no result). Either way it can forge its result file: capture is advisory
(the build cache is keyed on the captured arguments, and the worker loads only a library built from
exactly the arguments it passes). Linux only.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

from kernelzero.types import from_dict
from kernelzero.verify.sandbox import safe_fs

TRACEBACK_LIMIT = 2000  # characters of a candidate's traceback kept in CaptureError
CAPTURE_ERROR_KINDS = ("import_error", "timeout", "crash", "bad_result")


@dataclass(frozen=True)
class InlineBuild:
    """The arguments of one `load_inline` call, as the candidate made it."""

    name: str  # extension name; becomes -DTORCH_EXTENSION_NAME
    cpp_sources: tuple[str, ...]  # C++ source strings, joined into main.cpp
    cuda_sources: tuple[str, ...]  # CUDA source strings, joined into cuda.cu
    functions: tuple[str, ...] | None  # names to bind with pybind; None: the sources bind themselves
    extra_cflags: tuple[str, ...] = ()  # flags for the C++ compiler (main.cpp)
    extra_cuda_cflags: tuple[str, ...] = ()  # flags for nvcc (cuda.cu)
    extra_include_paths: tuple[str, ...] = ()  # -I folders for both compilers
    with_cuda: bool | None = None  # None: decided by whether there are cuda sources
    extra_ldflags: tuple[str, ...] = ()  # linker flags (recorded; a compile check does not link)
    no_implicit_headers: bool = False  # True: load_inline adds no #include lines
    with_pytorch_error_handling: bool = True  # bindings go through torch::wrap_pybind_function


class CaptureError(Exception):
    """The candidate could not be imported far enough to see its builds."""

    def __init__(self, kind: str, message: str, exc_type: str = "", traceback_tail: str = ""):
        super().__init__(f"{kind}: {message}")
        self.kind = kind  # one of CAPTURE_ERROR_KINDS
        self.message = message
        self.exc_type = exc_type  # the candidate's exception class name, e.g. "SyntaxError"
        self.traceback_tail = traceback_tail  # last TRACEBACK_LIMIT characters of its traceback


# ---------------------------------------------------------------------------------------------- capture


def capture_load_inline(candidate_path: str, timeout_s: float, sandbox=None) -> list[InlineBuild]:
    """Import the candidate in a child process and return its `load_inline` calls, in order ([] if none).

    `sandbox` (a `sandbox.SandboxPlan`, process.plan_sandbox; None: the default options' plan) runs the child in a sandbox of its own (a uid taken
    for this call, PID, mount and network namespaces: sandbox/box.py); thread-safe (no preexec function).

    Raises CaptureError when the import fails before any call (`import_error`, with the exception type and
    traceback tail), hangs (`timeout`) or dies without a result (`crash`).
    """
    from kernelzero.verify.options import VerifyOptions
    from kernelzero.verify.sandbox.process import plan_for, released, role_plan, sandbox_argv

    sandbox = sandbox if sandbox is not None else plan_for(VerifyOptions())

    source = Path(candidate_path).read_text()
    with tempfile.TemporaryDirectory(prefix="kz-capture-") as tmp, released(role_plan(sandbox)) as role:
        work = _child_folder(Path(tmp), source, role)
        target, result = work / "candidate.py", work / "capture.json"
        bootstrap = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from kernelzero.verify.backends.cuda.capture import _child_main; sys.exit(_child_main(sys.argv[2:]))"
        )
        src_root = str(Path(__file__).resolve().parents[2])
        argv = [sys.executable, "-I", "-B", "-c", bootstrap, src_root, str(target), str(result)]
        log = Path(tmp) / "output.log"  # beside the child's folder, in this user's own: opened here, written there
        argv = sandbox_argv(argv, role, work)  # no preexec function: the pool calls this from threads
        (code,), timed_out = run_group([(argv, log)], work, _scrubbed_env(work), timeout_s)
        payload = _read_json(result)
        output = read_bounded(log)[-TRACEBACK_LIMIT:]
    if timed_out:
        raise CaptureError("timeout", f"importing the candidate took longer than {timeout_s:g} s")
    if payload is None:
        raise CaptureError("crash", f"the capture process exited with {code} and no result", "", output)
    return _builds_from(payload)


def _child_folder(tmp: Path, source: str, sandbox) -> Path:
    """`tmp/box` with the candidate's source, handed to the sandbox user when there is one; `tmp` stays this
    user's own (so `box` cannot be swapped for a link) and holds the log. Made before it is handed over."""
    owner = (sandbox.uid, sandbox.gid) if sandbox is not None and sandbox.uid is not None else None
    tmp.chmod(0o711)  # the sandbox user passes through to its folder
    os.mkdir(tmp / "box", 0o700)
    fd = safe_fs.open_folder(tmp / "box")
    try:
        safe_fs.write_new(fd, "candidate.py", source.encode(), 0o644, owner)
        if owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)
    return tmp / "box"


def _builds_from(payload: dict) -> list[InlineBuild]:
    try:
        if not payload["ok"]:
            raise CaptureError("import_error", payload["message"], payload["exc_type"], payload["traceback"])
        return [from_dict(InlineBuild, b) for b in payload["builds"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise CaptureError("bad_result", f"unreadable capture result: {exc!r}") from None


class _CaptureStop(BaseException):
    """Stops the candidate's import when it uses an extension; BaseException so `except Exception` misses it."""


class _Unbuilt(types.ModuleType):
    """Stands in for a built extension: its functions exist but stop the import when called."""

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def stop(*args, **kwargs):
            raise _CaptureStop(f"{self.__name__}.{attr} called during import")

        return stop


def _child_main(argv: list[str]) -> int:
    """Child side: patch load_inline, exec the candidate as module `kz_candidate`, write the JSON result.

    The source is compiled before torch is imported, so a syntax error costs no torch import.
    """
    candidate, result_path = argv
    sys.argv = [candidate]
    builds: list[dict] = []
    payload: dict = {"ok": True, "builds": builds}
    try:
        code = compile(Path(candidate).read_text(), Path(candidate).name, "exec")
        _patch_load_inline(builds)
        module = types.ModuleType("kz_candidate")
        module.__file__ = candidate
        sys.modules["kz_candidate"] = module
        exec(code, module.__dict__)
    except _CaptureStop:
        pass
    except BaseException as exc:  # the candidate's own error; after a recorded build it no longer matters
        if not builds:
            payload = {
                "ok": False,
                "exc_type": type(exc).__name__,
                "message": str(exc)[:500],
                "traceback": _candidate_traceback(exc),
            }
    Path(result_path).write_text(json.dumps(payload))
    return 0


def _patch_load_inline(builds: list[dict]) -> None:
    import torch.utils.cpp_extension as cpp_extension

    signature = inspect.signature(cpp_extension.load_inline)

    def record(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        builds.append(recorded(bound.arguments))
        return _Unbuilt(str(bound.arguments["name"]))

    def refuse(*args, **kwargs):
        raise RuntimeError(
            "kernelzero captures load_inline builds only; torch.utils.cpp_extension.load "
            "(sources from files) is not supported"
        )

    cpp_extension.load_inline = record
    cpp_extension.load = refuse
    cpp_extension._jit_compile = refuse  # nothing may build in a capture, whatever the entry point


def _candidate_traceback(exc: BaseException) -> str:
    """The traceback without this module's own frames (the candidate's frames and the error), bounded."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))[-TRACEBACK_LIMIT:]


def recorded(arguments: dict) -> dict:
    functions = arguments["functions"]
    if isinstance(functions, str):
        functions = [functions]
    return {
        "name": str(arguments["name"]),
        "cpp_sources": _strings(arguments["cpp_sources"]),
        "cuda_sources": _strings(arguments["cuda_sources"]),
        "functions": None if functions is None else [str(f) for f in functions],  # a dict gives its keys
        "extra_cflags": _strings(arguments["extra_cflags"]),
        "extra_cuda_cflags": _strings(arguments["extra_cuda_cflags"]),
        "extra_include_paths": _strings(arguments["extra_include_paths"]),
        "with_cuda": None if arguments["with_cuda"] is None else bool(arguments["with_cuda"]),
        "extra_ldflags": _strings(arguments["extra_ldflags"]),
        "no_implicit_headers": bool(arguments.get("no_implicit_headers", False)),
        "with_pytorch_error_handling": bool(arguments.get("with_pytorch_error_handling", True)),
    }


def _strings(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    items = list(value)
    if not all(isinstance(item, str) for item in items):
        raise TypeError(f"load_inline expects a string or a list of strings, got {items!r:.200}")
    return items


# ------------------------------------------------------------------------------------------ processes


def _scrubbed_env(home: Path, *tools: str | Path | None) -> dict[str, str]:
    """PATH (plus the folders of `tools`), a private HOME/TMPDIR, C locale, no GPU visible, one thread."""
    path = [str(Path(t).parent) for t in tools if t] + [os.environ.get("PATH", os.defpath)]
    return {
        "PATH": os.pathsep.join(path),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
    }


def run_group(
    jobs: list[tuple[list[str], Path]],
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    popen_kwargs: dict | None = None,
):
    """Run the commands at once, each in its own session with output to its log; kill all at the deadline.

    Returns (exit codes, timed_out). Every process group is killed at the end, so nothing outlives the call.
    """
    procs = []
    deadline = time.monotonic() + timeout_s
    timed_out = False
    try:
        for argv, log in jobs:
            with open(log, "wb") as out:
                procs.append(
                    subprocess.Popen(
                        argv,
                        cwd=cwd,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        **(popen_kwargs or {}),
                    )
                )
        for proc in procs:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    return [proc.returncode for proc in procs], timed_out


def read_bounded(path: Path, head: int = 256_000, tail: int = 64_000) -> str:
    """A log's text, keeping its head and tail when it is larger than head + tail bytes. Only a regular file, not
    through a link (safe_fs.open_regular): "" otherwise."""
    try:
        with os.fdopen(safe_fs.open_regular(path), "rb") as f:
            data = f.read(head + tail + 1)
            if len(data) > head + tail:
                f.seek(-tail, os.SEEK_END)
                data = data[:head] + b"\n[...]\n" + f.read()
    except OSError:
        return ""
    return data.decode(errors="replace")


def _read_json(path: Path, limit: int = 64 << 20) -> dict | None:
    """The JSON object in `path`, which the sandboxed child wrote: a regular file only, read without following a
    link and without waiting on a FIFO (safe_fs.read_regular); None otherwise."""
    try:
        payload = json.loads(safe_fs.read_regular(path, limit))
    except (OSError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None

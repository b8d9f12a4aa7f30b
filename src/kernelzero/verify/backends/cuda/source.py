"""Compile-check the `load_inline` builds of a CUDA candidate without a GPU.

What: `compile_check(build, arch=..., workdir=...)` takes an `InlineBuild` (captured by
`cuda_capture.capture_load_inline`, re-exported here) and writes the two files `load_inline` (torch 2.13)
would write, `main.cpp` (`#include <torch/extension.h>`, the cpp sources, generated pybind bindings for
`functions`) and `cuda.cu` (`torch/types.h`, `cuda.h`, `cuda_runtime.h`, the cuda sources), then runs
`nvcc -cubin -Xptxas -v` on `cuda.cu` for the target (front end, device code, ptxas: registers and
spills) and, by default and at the same time, `c++ -fsyntax-only` on `main.cpp`, with torch's flags.

Why: without a GPU these are the only checks a CUDA candidate can get, and the compiler's first errors are
the feedback a Coder can act on. CPU wheels of torch lack some headers that `ATen/cuda/CUDAContext.h`
needs; `stubs/` stands in for them (real headers in the CUDA include folder come first and win).
A candidate that really calls cuBLAS & co. cannot be checked here: that is `ok=None`, stage
`needs_headers`, not a compile error. Line numbers in logs are those of `load_inline`'s files
(`cuda.cu` has 3 header lines before the first cuda source).

How to run: `python -m kernelzero.verify.backends.cuda.source CANDIDATE.py [--arch sm_90] [--no-cpp]` captures the
candidate's builds and prints their compile results as JSON lines.

Protected: compilers run in their own process groups with a scrubbed environment, a hard timeout and
only allow-listed candidate flags (no `-ccbin`, `--run`, `-o`, `-Xlinker`, `-fplugin`, ...); the
capture's protections are in `cuda_capture.py`. Not protected: an `#include` of any readable file can
echo its lines into the log. Linux only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kernelzero.types import to_dict
from kernelzero.verify.backends.cuda.capture import (  # re-exported: callers import the capture API from here too
    CAPTURE_ERROR_KINDS,
    TRACEBACK_LIMIT,
    CaptureError,
    InlineBuild,
    _scrubbed_env,
    capture_load_inline,
    read_bounded,
    run_group,
)
from kernelzero.verify.backends.cuda.flags import filter_flags

__all__ = [
    "CAPTURE_ERROR_KINDS",
    "COMPILE_STAGES",
    "LOG_LIMIT",
    "TRACEBACK_LIMIT",
    "CaptureError",
    "CompileResult",
    "InlineBuild",
    "KernelUsage",
    "capture_load_inline",
    "compile_check",
    "filter_flags",
    "find_nvcc",
    "first_errors",
    "inline_files",
    "parse_ptxas",
]

LOG_LIMIT = 4000  # characters of compiler output kept in CompileResult.log_tail
COMPILE_STAGES = ("compiled", "cuda", "cpp", "timeout", "no_compiler", "needs_headers", "nothing_to_check")
STUB_DIR = Path(__file__).parent / "stubs"
# What load_inline prepends to the .cu file, and what torch adds to every nvcc call (torch 2.13).
CUDA_PRELUDE = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")
TORCH_NVCC_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)


@dataclass(frozen=True)
class KernelUsage:
    """What ptxas reports for one kernel entry."""

    name: str  # the entry's mangled name, e.g. _Z11relu_kernelPKfPfl
    registers: int  # registers per thread
    spill_stores: int  # bytes spilled to local memory
    spill_loads: int  # bytes reloaded from local memory
    stack_bytes: int  # stack frame per thread
    shared_bytes: int  # static shared memory per block


@dataclass(frozen=True)
class CompileResult:
    """Outcome of compile-checking one InlineBuild."""

    ok: bool | None  # True compiles; False does not (or timed out); None could not be checked here
    stage: str  # where it ended, one of COMPILE_STAGES
    log_tail: str  # first errors with file:line first, bounded by LOG_LIMIT
    seconds: float  # wall time of the check
    arch: str = ""  # target, e.g. sm_90
    kernels: tuple[KernelUsage, ...] = ()  # ptxas resource usage per kernel (when nvcc got that far)
    ignored_flags: tuple[str, ...] = ()  # candidate flags not passed on: target-arch flags, unlisted flags

    @property
    def max_registers(self) -> int | None:
        return max((k.registers for k in self.kernels), default=None)

    @property
    def spill_bytes(self) -> int:
        return sum(k.spill_stores + k.spill_loads for k in self.kernels)


# ------------------------------------------------------------------------------------------ compile check


def inline_files(build: InlineBuild) -> dict[str, str]:
    """The files `load_inline` would write for `build`: main.cpp always, cuda.cu when there are cuda sources."""
    cpp = list(build.cpp_sources)
    if not build.no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    if build.functions is not None:
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for fn in build.functions:
            target = f"torch::wrap_pybind_function({fn})" if build.with_pytorch_error_handling else fn
            cpp.append(f'm.def("{fn}", {target}, "{fn}");')
        cpp.append("}")
    files = {"main.cpp": "\n".join(cpp)}
    if build.cuda_sources:
        prelude = [] if build.no_implicit_headers else list(CUDA_PRELUDE)
        files["cuda.cu"] = "\n".join(prelude + list(build.cuda_sources))
    return files


def compile_check(
    build: InlineBuild,
    *,
    arch: str = "sm_90",
    workdir: Path,
    timeout_s: float = 300,
    check_cpp: bool = True,
    cuda_home: str | Path | None = None,
    cxx: str | None = None,
) -> CompileResult:
    """Compile-check `build` for `arch` in `workdir` (created if needed); never runs longer than `timeout_s`.

    nvcc (cuda.cu) and, with `check_cpp`, c++ -fsyntax-only (main.cpp, ~20 s) run at the same time.
    `cuda_home` overrides CUDA_HOME / CUDA_PATH / PATH when looking for nvcc; `cxx` is the host compiler
    (default: `c++` on PATH, as torch uses).
    """
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise ValueError(f"arch must look like sm_90 or sm_90a, got {arch!r}")
    start = time.monotonic()
    files = inline_files(build)
    nvcc = find_nvcc(cuda_home) if "cuda.cu" in files else None
    host = cxx or shutil.which("c++") or shutil.which("g++")
    skip = _cannot_check("cuda.cu" in files, nvcc, host, check_cpp, cuda_home)
    if skip:
        return CompileResult(None, skip[0], skip[1], round(time.monotonic() - start, 3), arch)
    workdir.mkdir(parents=True, exist_ok=True)
    for fname, text in files.items():
        (workdir / fname).write_text(text)
    cuda_include = _cuda_include(nvcc)
    with_cuda = build.with_cuda if build.with_cuda is not None else bool(build.cuda_sources)
    includes = _include_flags(build, cuda_include if with_cuda else None)
    jobs, ignored = [], []
    if nvcc is not None:
        argv, dropped = _nvcc_argv(str(nvcc), host, arch, build, includes)
        jobs.append((argv, workdir / "nvcc.log"))
        ignored += dropped
    if check_cpp:
        argv, dropped = _cxx_argv(host, build, includes)
        jobs.append((argv, workdir / "cxx.log"))
        ignored += dropped
    env = {**_scrubbed_env(workdir, host, nvcc), "LC_ALL": "C"}  # C locale: plain ASCII quotes in messages
    codes, timed_out = run_group(jobs, workdir, env, timeout_s)
    logs = {log.name: read_bounded(log) for _, log in jobs}
    failed = [(log.name, code) for (_, log), code in zip(jobs, codes) if code != 0]
    ok, stage, text = _judge(logs, failed, timed_out, timeout_s, workdir, cuda_include)
    kernels = tuple(parse_ptxas(logs.get("nvcc.log", "")))
    seconds = round(time.monotonic() - start, 3)
    return CompileResult(ok, stage, text[:LOG_LIMIT], seconds, arch, kernels, tuple(ignored))


def _cannot_check(
    has_cuda: bool, nvcc: Path | None, host: str | None, check_cpp: bool, cuda_home: str | Path | None
) -> tuple[str, str] | None:
    """(stage, message) when this machine cannot check the build, else None."""
    if has_cuda and nvcc is None:
        where = f"under {cuda_home}" if cuda_home else "(looked in CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda)"
        return "no_compiler", f"no compiler: nvcc not found {where}"
    if not has_cuda and not check_cpp:
        return "nothing_to_check", "no cuda sources and the C++ check is off"
    if host is None:
        return "no_compiler", "no compiler: no host C++ compiler (c++, g++) on PATH"
    return None


def _judge(
    logs: dict[str, str],
    failed: list[tuple[str, int]],
    timed_out: bool,
    timeout_s: float,
    workdir: Path,
    cuda_include: Path | None,
) -> tuple[bool | None, str, str]:
    """(ok, stage, log text) from the steps' logs and exit codes."""
    text = _report(logs, failed, workdir)
    # A step killed at the deadline may already have printed its errors: those are the useful feedback.
    erred = [name for name, _ in failed if any(_ERROR_LINE.search(line) for line in logs[name].splitlines())]
    if timed_out:
        stage = ("cuda" if "nvcc.log" in erred else "cpp") if erred else "timeout"
        return False, stage, f"stopped at the {timeout_s:g} s limit\n{text}"
    if not failed:
        return True, "compiled", text
    if _needs_library(text, cuda_include):
        return None, "needs_headers", f"uses a CUDA library whose headers are not installed here\n{text}"
    return False, "cuda" if any(name == "nvcc.log" for name, _ in failed) else "cpp", text


def find_nvcc(cuda_home: str | Path | None = None) -> Path | None:
    """nvcc under `cuda_home` if given; else under CUDA_HOME or CUDA_PATH, on PATH, or in /usr/local/cuda."""
    homes = [cuda_home] if cuda_home else [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    for home in homes:
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return Path(home) / "bin" / "nvcc"
    if cuda_home:
        return None
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    default = Path("/usr/local/cuda/bin/nvcc")
    return default if default.is_file() else None


def _cuda_include(nvcc: Path | None) -> Path | None:
    if nvcc is None:
        return None
    # /usr/local/bin/nvcc may be a wrapper script, so also try torch's default home
    for home in (nvcc.parent.parent, nvcc.resolve().parent.parent, Path("/usr/local/cuda")):
        if (home / "include" / "cuda_runtime.h").is_file():
            return home / "include"
    return None


def _torch_include() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("torch is not installed; its headers are needed for a compile check")
    return Path(list(spec.submodule_search_locations)[0]) / "include"


def _include_flags(build: InlineBuild, cuda_include: Path | None) -> list[str]:
    """-D and include flags shared by both compilers, in torch's order (user -I first, then -isystem)."""
    torch_inc = _torch_include()
    system = [torch_inc, torch_inc / "torch" / "csrc" / "api" / "include"]
    if cuda_include is not None:
        system.append(cuda_include)
    system += [STUB_DIR, Path(sysconfig.get_path("include", scheme="posix_prefix"))]
    flags = [f"-DTORCH_EXTENSION_NAME={build.name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    flags += [f"-I{os.path.abspath(p.strip())}" for p in build.extra_include_paths]
    for folder in system:
        flags += ["-isystem", str(folder)]
    return flags


def _nvcc_argv(nvcc: str, host: str, arch: str, build: InlineBuild, includes: list[str]) -> tuple[list[str], list[str]]:
    user, dropped = filter_flags(build.extra_cuda_cflags, nvcc=True)
    argv = [nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", "-ccbin", host, *includes, *TORCH_NVCC_FLAGS]
    argv += ["--compiler-options", "-fPIC", *user]
    if not any(flag.startswith(("-std=", "--std=")) for flag in user):
        argv.append("-std=c++20")
    return argv + ["-o", "cuda.cubin", "cuda.cu"], dropped


def _cxx_argv(host: str, build: InlineBuild, includes: list[str]) -> tuple[list[str], list[str]]:
    user, dropped = filter_flags(build.extra_cflags, nvcc=False)
    argv = [host, *includes, "-fPIC", "-std=c++20", *user]
    return argv + ["-fsyntax-only", "-fmax-errors=20", "-fdiagnostics-color=never", "main.cpp"], dropped


# ---------------------------------------------------------------------------------------------- reports

_ERROR_LINE = re.compile(r": (fatal |catastrophic )?error\b|^nvcc fatal|^ptxas (error|fatal)|^[cg]\+\+: fatal")
_DIAG_START = re.compile(r"^(\S+(\(\d+\)|:\d+:\d+): |In file included from|nvcc |ptxas |\d+ errors? detected)")
_LIBRARY = re.compile(r"\b(cublas\w*|cusparse\w*|cusolver\w*|cufft\w*|curand\w*|cudnn\w*|nccl\w*|cutlass|cute)\b")


def first_errors(log: str, limit: int = LOG_LIMIT, context: int = 3) -> str:
    """The log's error lines in order, each with up to `context` following lines (source, caret), bounded.

    Falls back to the log's head and tail when no line looks like an error.
    """
    lines = log.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line):
            block = [line]
            for nxt in lines[i + 1 : i + 1 + context]:
                if not nxt.strip() or _DIAG_START.match(nxt):
                    break
                block.append(nxt)
            blocks.append("\n".join(block))
    if not blocks:
        return log if len(log) <= limit else log[: limit // 3] + "\n[...]\n" + log[-(limit * 2 // 3 - 8) :]
    out, used = [], 0
    for block in blocks:
        if used + len(block) + 1 > limit:
            out.append(f"[... {len(blocks) - len(out)} more errors]")
            break
        out.append(block)
        used += len(block) + 1
    return "\n".join(out)


def _report(logs: dict[str, str], failed: list[tuple[str, int]], workdir: Path) -> str:
    """Errors of the failed steps (nvcc first), with long paths shortened; the last log lines on success."""
    torch_inc = str(_torch_include())
    parts = []
    for name, code in sorted(failed, key=lambda f: f[0] != "nvcc.log"):
        text = logs[name].replace(f"{workdir}/", "").replace(torch_inc, "<torch>/include")
        what = "nvcc cuda.cu" if name == "nvcc.log" else "c++ main.cpp"
        parts.append(f"== {what}: exit {code}\n{first_errors(text, LOG_LIMIT // max(len(failed), 1) - 40)}")
    if not failed:
        return "\n".join(text[-600:] for text in logs.values() if text)
    return "\n".join(parts)


def _needs_library(text: str, cuda_include: Path | None) -> bool:
    """Errors name a CUDA library that this machine only has stubs (or nothing) for."""
    has_real = cuda_include is not None and (cuda_include / "cublas_v2.h").is_file()
    errors = "\n".join(line for line in text.splitlines() if _ERROR_LINE.search(line) or "No such file" in line)
    return not has_real and bool(_LIBRARY.search(errors))


def parse_ptxas(log: str) -> list[KernelUsage]:
    """Per-kernel registers, spills, stack and shared memory from `ptxas -v` output."""
    kernels, entry, props = [], None, {}
    current = None
    for line in log.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            entry = m.group(1)
        elif m := re.search(r"Function properties for (\S+)", line):
            current = m.group(1)
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            props[current] = tuple(int(g) for g in m.groups())
        elif (m := re.search(r"Used (\d+) registers", line)) and entry is not None:
            stack, stores, loads = props.get(entry, (0, 0, 0))
            smem = re.search(r"(\d+) bytes smem", line)
            kernels.append(KernelUsage(entry, int(m.group(1)), stores, loads, stack, int(smem.group(1)) if smem else 0))
            entry = None
    return kernels


# -------------------------------------------------------------------------------------------------- cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Capture a candidate's load_inline builds and compile-check them.")
    parser.add_argument("candidate", help="path of the candidate .py (defines ModelNew, calls load_inline)")
    parser.add_argument("--arch", default="sm_90", help="target GPU architecture, e.g. sm_90")
    parser.add_argument("--no-cpp", action="store_true", help="skip the C++ syntax check of main.cpp")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per step")
    args = parser.parse_args(argv)
    try:
        builds = capture_load_inline(args.candidate, args.timeout)
    except CaptureError as exc:
        print(json.dumps({"error": exc.kind, "exc_type": exc.exc_type, "message": exc.message}))
        return 1
    for build in builds:
        with tempfile.TemporaryDirectory(prefix="kz-compile-") as tmp:
            result = compile_check(
                build, arch=args.arch, workdir=Path(tmp), timeout_s=args.timeout, check_cpp=not args.no_cpp
            )
        print(json.dumps({"build": build.name, **to_dict(result)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fast, cached builds of `load_inline` extensions: the build stage of the verification pool.

What: `build_extension(build, cache)` compiles one `load_inline` call (an `InlineBuild`, as captured by
`cuda_capture`) into a shared library the way torch would, and keeps it in a `BuildCache` keyed on
everything that decides the bytes of the library. `prebuild(source, cache)` captures a candidate's
calls (in a sandboxed child, see cuda_capture.py) and builds each, so a GPU runner only imports.
The cache itself is build_cache.py. The worker side (`hook.py`, `install_cache_hook`) makes the candidate's `load_inline` load a library
from the cache when one was built for exactly its arguments, and otherwise build privately with the same recipe.

What the recipe changes against torch's `load_inline`, and why each change keeps the meaning:

| change | why the library means the same |
|---|---|
| same generated files | `main.cpp` (the `torch/extension.h` include, the C++ sources, the pybind11 bindings) and `cuda.cu` (torch's three-line prelude, the CUDA sources) are written as torch writes them (`cuda_source.inline_files`) |
| same flags | the ninja file is written by torch's own writer (`_write_ninja_file_to_build_library`) with torch's linker flags, so defines, includes, `-std`, arch flags and `-O` levels are torch's |
| own build folder per build | no lock on torch's shared extensions folder, so builds never wait on each other; the folder name does not reach the compiler |
| two attempts | the fast path below, and when it does not compile, the files as written (only the precompiled `torch/extension.h` added), whose result stands: a source never changes from failing to passing or back through the fast path |
| precompiled headers (pch.py) | built once per (compiler, flags, header) with exactly the unit's flags (minus `-DTORCH_EXTENSION_NAME`, which headers do not use), found through an extra `-I` folder; GCC checks the flags itself and parses the real header when they differ (`-Winvalid-pch` says so in the log) |
| `main.cpp` starts with `kernelzero/bindings.h`, not `torch/extension.h` (fast path) | the tensor API and every pybind11 type caster torch defines (pch.py), without the C++ frontend; the source's own `torch/extension.h` includes are dropped as below. Same risk as below |
| `#include <torch/extension.h>` dropped from `cuda.cu` (fast path) | torch's prelude already includes `torch/types.h` (tensors, ATen ops, factories); `extension.h` adds the Python bindings and the C++ frontend (nn, optim, data), which kernels and launchers rarely use (code that does fails to compile and is built as written). Risk: an overload declared only in the frontend headers that would have been preferred over an ATen one; we know of none for the names launchers use |
| host/device split (cuda_split.py, fast path) | the CUDA source becomes `device.cu` (kernels, device functions, types, macros; no torch header; one launcher per kernel) for nvcc and `host.cpp` (host functions, launches through the launchers; torch's prelude, precompiled) for the host compiler, each item keeping its text and order; refused for what it does not model (templates, globals, conditional compilation, ...). Host code gets torch's C++ flags plus nvcc's defines, at -O1 where nvcc would use -O2/-O3 (`__CUDACC__` is not defined for it) |
| the build cache | keyed on the recipe version, the build's arguments, torch/CUDA/compiler versions and the arch list: a hit is what a fresh build of the same input would produce |

Not changed: the device compile (nvcc's flags and stages), the link.
Protected: the cache is written only by trusted code (`prebuild`, run by the pool); the worker's private
builds go to its own folder, and with `build_pch=False` they only read the shared precompiled headers
(their binding header is written in the build's own folder): build_cache.py has the ownership rules. A
worker running as root on a machine without a user drop could still write the cache folder (see README,
the trust model).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelzero.verify.backends.cuda import pch
from kernelzero.verify.backends.cuda.build_cache import BuildCache, make_dirs
from kernelzero.verify.backends.cuda.capture import InlineBuild, read_bounded, run_group
from kernelzero.verify.backends.cuda.split import host_defines_and_opt, split_sources

RECIPE = "kz-build-3"  # bump when the recipe changes: old cache entries are then never used
EXTENSION_INCLUDE = pch.include_pattern(pch.HEADERS["extension"])


class BuildError(RuntimeError):
    """A build that failed; the message starts like torch's ("Error building extension ...")."""


@dataclass
class BuildResult:
    """One build: where the library is, how long each stage took, what changed."""

    key: str
    ok: bool
    library: str = ""  # path of the .so ('' when the build failed)
    cached: bool = False  # answered from the cache
    seconds: dict[str, float] = field(default_factory=dict)  # total, main.cpp, cuda.cu, link, pch
    transforms: tuple[str, ...] = ()  # which of the recipe's changes applied
    log: str = ""  # compiler output (failed builds; warnings otherwise)


# ------------------------------------------------------------------------------------------- keys


def _tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "absent"
    return " | ".join(line for line in out.strip().splitlines() if line.strip()) or "unknown"


@functools.cache
def toolchain() -> dict[str, str]:
    """What a library's bytes depend on besides its sources: versions and the arch list (once per process;
    callers must not change the dict)."""
    import torch
    from torch.utils import cpp_extension as ce

    nvcc = str(Path(ce.CUDA_HOME, "bin", "nvcc")) if ce.CUDA_HOME else "nvcc"
    return {
        "recipe": RECIPE,
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "nvcc": _tool_version([nvcc, "--version"]),
        "cxx": _tool_version([os.environ.get("CXX", "c++"), "--version"]).split(" | ")[0],
        "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", "") or _arch_list(),
        "python": sys.version.split()[0],
        "abi": str(torch._C._GLIBCXX_USE_CXX11_ABI),
    }


def _arch_list() -> str:
    import torch

    if torch.cuda.is_available():
        return ";".join(
            sorted({"%d.%d" % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        )
    return "9.0"


def _with_cuda(build: InlineBuild) -> bool:
    """`with_cuda=None` means: are there CUDA sources (as in torch)."""
    return build.with_cuda if build.with_cuda is not None else bool(build.cuda_sources)


def build_key(build: InlineBuild, tools: dict[str, str]) -> str:
    """Same key for calls that build the same library."""
    fields = asdict(build)
    fields["with_cuda"] = _with_cuda(build)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    blob = json.dumps({"build": fields, "tools": tools}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def prebuild_artifacts(source: str, timeout_s: float = 600.0) -> dict[str, bytes]:
    """Capture and build a candidate's extensions in a temporary cache; return them for `install_artifacts`."""
    with tempfile.TemporaryDirectory(prefix="kz-prebuild-") as tmp:
        cache = BuildCache(tmp)
        results = prebuild(source, cache, timeout_s=timeout_s)
        return cache.export([r.key for r in results if r.ok])


# ------------------------------------------------------------------------------------------- builds


def _ninja_text(build: InlineBuild, folder: Path, sources: list[Path], with_cuda: bool) -> str:
    """The ninja file torch would write for this build (torch's own writer and linker flags)."""
    from torch.utils import cpp_extension as ce

    ld_params = inspect.signature(ce._prepare_ldflags).parameters
    ld_wanted = dict(
        extra_ldflags=list(build.extra_ldflags),
        with_cuda=with_cuda,
        with_sycl=False,
        verbose=False,
        is_standalone=False,
    )
    ldflags = ce._prepare_ldflags(**{k: v for k, v in ld_wanted.items() if k in ld_params})
    wanted = dict(
        path=str(folder / "build.ninja"),
        name=build.name,
        sources=[str(s) for s in sources],
        extra_cflags=list(build.extra_cflags),
        extra_cuda_cflags=list(build.extra_cuda_cflags),
        extra_sycl_cflags=[],
        extra_ldflags=ldflags,
        extra_include_paths=list(build.extra_include_paths),
        with_cuda=with_cuda,
        with_sycl=False,
        is_standalone=False,
    )
    params = inspect.signature(ce._write_ninja_file_to_build_library).parameters
    ce._write_ninja_file_to_build_library(**{k: v for k, v in wanted.items() if k in params})
    return (folder / "build.ninja").read_text()


def _ninja_var(text: str, name: str) -> str:
    match = re.search(rf"^{name} = (.*)$", text, re.M)
    return match.group(1) if match else ""


def lighten(text: str) -> str:
    """The text without its `#include <torch/extension.h>` lines (each becomes a comment: line numbers stay)."""
    return EXTENSION_INCLUDE.sub("// include of torch/extension.h dropped by kernelzero (cuda_build.py)", text)


def _stage_seconds(folder: Path) -> dict[str, float]:
    """Per-target wall seconds from ninja's log."""
    out = {}
    log = folder / ".ninja_log"
    if not log.exists():
        return out
    for line in log.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 4:
            target = parts[3]
            label = (
                "cuda.cu"
                if target.endswith(".cuda.o")
                else "main.cpp"
                if target.endswith("main.o")
                else "host.cpp"
                if target.endswith("host.o")
                else "link"
            )
            out[label] = round((int(parts[1]) - int(parts[0])) / 1e3, 3)
    return out


def _fast_units(
    build: InlineBuild, folder: Path, files: dict[str, str], split: bool, light: bool
) -> tuple[list[Path], list[str]]:
    """Write the fast path's units beside the files as written; (sources, transforms)."""
    transforms = []
    main = files["main.cpp"]
    if light and EXTENSION_INCLUDE.match(main):  # inline_files puts torch's include on the first line
        main = pch.include_line("bindings") + lighten(main[main.index("\n") :] if "\n" in main else "")
        transforms.append("light-bindings")
    (folder / "fast_main.cpp").write_text(main)
    sources = [folder / "fast_main.cpp"]
    cuda = files.get("cuda.cu", "")
    units = split_sources(build, folder) if split and cuda and not build.no_implicit_headers else None
    if units:
        host = folder / "host.cpp"
        if light:
            host.write_text(lighten(host.read_text()))
        return sources + units[1:], transforms + ["split"]
    if cuda:
        light_cuda = light and not build.no_implicit_headers and EXTENSION_INCLUDE.search(cuda)
        (folder / "fast.cu").write_text(lighten(cuda) if light_cuda else cuda)
        return sources + [folder / "fast.cu"], transforms + (["light-headers"] if light_cuda else [])
    return sources, transforms


def build_extension(
    build: InlineBuild,
    cache: BuildCache,
    *,
    timeout_s: float = 600.0,
    use_pch: bool = True,
    light_headers: bool = True,
    split: bool = True,
    tools: dict | None = None,
    pch_root: Path | None = None,
    build_pch: bool = True,
) -> BuildResult:
    """Build one extension into `cache` (or find it there). Never raises for a failed compile.

    First the fast path (lighter headers, host/device split, precompiled headers); if that does not
    compile, the files as written (with torch's `torch/extension.h`, precompiled), whose result stands.
    The precompiled headers live under `pch_root` (default: the cache's root); `build_pch=False` only
    uses ones that exist.

    Long because the two attempts, the cache lookup and the timing of each stage read best in one place, in
    the order they happen: each step's condition decides whether the next runs.
    """
    from kernelzero.verify.backends.cuda.source import inline_files

    tools = tools or toolchain()
    key = build_key(build, tools)
    start = time.perf_counter()
    hit = cache.get(key)
    if hit is not None:
        return BuildResult(key, True, str(hit), cached=True, seconds={"total": round(time.perf_counter() - start, 3)})
    with_cuda = _with_cuda(build)
    seconds: dict[str, float] = {}
    make_dirs(cache.root)
    with tempfile.TemporaryDirectory(prefix="kz-build-", dir=cache.root) as tmp:
        folder = Path(tmp)
        files = inline_files(build)
        for name, text in files.items():
            (folder / name).write_text(text)
        written = [folder / name for name in files]
        fast, transforms = _fast_units(build, folder, files, split, light_headers)
        text = _ninja_text(build, folder, written, with_cuda)
        cflags, cxx, post = (
            _ninja_var(text, "cflags"),
            _ninja_var(text, "cxx") or "c++",
            _ninja_var(text, "post_cflags"),
        )
        host_cflags = f"{cflags} {host_defines_and_opt(build, cflags)}"  # what nvcc's host pass gave that code

        def header(flags: str, unit: Path) -> str:
            """`flags` with the include folder of the precompiled header the unit starts with, if any."""
            text = unit.read_text()
            name = next((h for h in pch.HEADERS if text.startswith(pch.include_line(h) + "\n")), None)
            if not use_pch or name is None:
                return flags
            folder_of, ready, took = pch.precompiled(
                pch_root or cache.root, name, cxx, flags, post, timeout_s, build_pch, scratch=folder
            )
            if took:
                seconds["pch"] = round(seconds.get("pch", 0.0) + took, 3)
            if ready:
                if "pch" not in transforms:
                    transforms.append("pch")
                unit.write_text(pch.first_include_only(text, name))
            return f"-I{shlex.quote(str(folder_of))} -Winvalid-pch {flags}" if folder_of is not None else flags

        def write_ninja(srcs: list[Path]) -> None:
            text = _ninja_text(build, folder, srcs, with_cuda)
            main_flags = header(cflags, srcs[0])
            text = re.sub(r"^cflags = .*$", lambda _: f"cflags = {main_flags}", text, count=1, flags=re.M)
            host = folder / "host.cpp"
            if host in srcs:  # an edge-level binding: only host.o gets these flags
                host_flags = header(host_cflags, host)
                text = re.sub(
                    rf"^(build [^\n]*host\.o: compile {re.escape(str(host))})$",
                    lambda m: f"{m.group(1)}\n  cflags = {host_flags}",
                    text,
                    count=1,
                    flags=re.M,
                )
            (folder / "build.ninja").write_text(text)

        log = folder / "ninja.log"

        def ninja() -> tuple[int, bool]:
            (code,), timed_out = run_group(
                [(["ninja", "-v", "-j", "4", "-C", str(folder)], log)],
                folder,
                dict(os.environ),
                timeout_s - (time.perf_counter() - start),
            )
            return code, timed_out

        as_written = not transforms  # nothing on the fast path differs from the files as written
        write_ninja(written if as_written else fast)
        code, timed_out = ninja()
        if code != 0 and not timed_out and not as_written:  # the files as written decide
            transforms = [f"{t}-fell-back" for t in transforms if t != "pch"]
            write_ninja(written)
            code, timed_out = ninja()
        seconds.update(_stage_seconds(folder))
        seconds["total"] = round(time.perf_counter() - start, 3)
        output = read_bounded(log)
        library = folder / f"{build.name}.so"
        if code != 0 or not library.exists():
            why = f"timed out after {timeout_s:.0f} s" if timed_out else f"ninja exited with {code}"
            return BuildResult(key, False, seconds=seconds, transforms=tuple(transforms), log=f"{why}\n{output}")
        final = cache.put(key, library, {"name": build.name, "seconds": seconds, "transforms": transforms})
    return BuildResult(
        key, True, str(final), seconds=seconds, transforms=tuple(transforms), log=output if "warning" in output else ""
    )


def prebuild(
    source: str,
    cache: BuildCache,
    *,
    timeout_s: float = 600.0,
    sandbox=None,
    **kwargs,
) -> list[BuildResult]:
    """Capture a candidate's `load_inline` calls (sandboxed child) and build each into `cache`.

    Returns [] when the candidate cannot be imported far enough (its verification says why).
    """
    from kernelzero.verify.backends.cuda.capture import CaptureError, capture_load_inline

    with tempfile.TemporaryDirectory(prefix="kz-capture-") as tmp:
        path = Path(tmp, "candidate.py")
        path.write_text(source)
        try:
            builds = capture_load_inline(str(path), min(timeout_s, 120.0), sandbox)
        except CaptureError:
            return []
    tools = toolchain()
    return [build_extension(b, cache, timeout_s=timeout_s, tools=tools, **kwargs) for b in builds]

"""Precompiled headers for the build stage (cuda_build.py) and the lighter headers they stand for.

What: `precompiled(root, header, cxx, flags, post_flags, ...)` returns an include folder that makes
`#include <HEADER>` in a unit compiled with exactly `flags` read a precompiled header (`HEADER.gch`),
built once per (compiler, flags, header) under `root/pch/` and shared by every later build. GCC checks the
flags itself: a `.gch` that does not match is skipped (`-Winvalid-pch` says so in the log) and the header
is parsed as usual, so a stale or mismatched file never changes what a unit means, only how long it takes.

The three headers (`HEADERS`):

| name | the unit's first include | used for |
|---|---|---|
| `extension` | `torch/extension.h` | `main.cpp` when a build is compiled as written (the fallback) |
| `bindings` | `kernelzero/bindings.h` (written here): `torch/types.h` and the headers `torch/python.h` includes from `torch/csrc` | `main.cpp` on the fast path |
| `types` | `torch/types.h` (torch's own prelude for `cuda.cu`) | `host.cpp` of a host/device split |

Why the lighter ones: GCC's precompiled header saves parsing but not the templates a header's inline code
instantiates, which every unit still pays at its end. `torch/extension.h` is `torch/all.h` (the C++ frontend:
nn, optim, data, serialisation) plus `torch/python.h`; on a 2-core machine a unit that includes it costs
~18 s even with the `.gch`; with `bindings` ~9.5 s, with `types` ~5 s (bench/service.md). A binding unit
needs the tensor API and pybind11's type casters: every caster torch defines comes from the `torch/csrc`
headers (`torch/python.h` itself and `torch/all.h` define none), so the bindings convert arguments the same
way. Candidate code that needs more (the frontend, `torch::nn` ...) does not compile against them, and
the build is then compiled as written, which decides (cuda_build.py).

Ownership: only trusted code (the pool's builders) creates folders and files under `root/pch/`, with modes
every user can read; a worker's build (`may_build=False`) uses a `.gch` there only when trusted code wrote
it, and otherwise writes the binding header into its own `scratch` folder (build_cache.py says why).

`first_include_only(text, header)`: a unit compiled with a `.gch` may include that header only once (GCC
looks for the real header beside the `.gch` and fails); every header here has `#pragma once`, so later
includes do nothing anyway and become comments (line numbers kept).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import subprocess
import threading
import time
from pathlib import Path

from kernelzero.verify.backends.cuda.build_cache import FILE_MODE, make_dirs, trusted

RECIPE = "kz-pch-1"  # part of each folder's name: bump when what a header holds changes
BINDINGS = """#pragma once
// kernelzero's binding header: torch's tensor API and the torch/csrc headers torch/python.h includes
// (every pybind11 type caster torch defines), without the C++ frontend of torch/all.h.
#include <torch/types.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/python_headers.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_numbers.h>
#include <torch/csrc/utils/python_tuples.h>
"""
HEADERS = {"extension": "torch/extension.h", "bindings": "kernelzero/bindings.h", "types": "torch/types.h"}


def include_line(header: str) -> str:
    return f"#include <{HEADERS[header]}>"


def include_pattern(path: str) -> re.Pattern:
    return re.compile(rf"^[ \t]*#[ \t]*include[ \t]*[<\"]{re.escape(path)}[>\"][ \t]*$", re.M)


def first_include_only(text: str, header: str) -> str:
    """`text` with the includes of `header` after the first turned into comments."""
    seen = []

    def drop(m: re.Match) -> str:
        seen.append(m)
        return (
            m.group(0) if len(seen) == 1 else f"// repeated include of {HEADERS[header]} dropped by kernelzero (pch.py)"
        )

    return include_pattern(HEADERS[header]).sub(drop, text)


def _real_header(path: str) -> Path:
    from torch.utils import cpp_extension as ce

    for folder in ce.include_paths():
        if Path(folder, path).is_file():
            return Path(folder, path)
    raise FileNotFoundError(f"{path} is not under torch's include paths")


def precompiled(
    root: Path,
    header: str,
    cxx: str,
    cflags: str,
    post_cflags: str,
    timeout_s: float,
    may_build: bool = True,
    scratch: Path | None = None,
) -> tuple[Path | None, bool, float]:
    """(include folder, whether its `.gch` is there, seconds spent building it now).

    The folder is None when the header is torch's and no `.gch` is there (nothing to add to the include
    path). `may_build=False` (a worker) only reads `root`: a `.gch` there is used when trusted code wrote it
    (build_cache.trusted); otherwise kernelzero's own header is written under `scratch`, the caller's
    private folder, and nothing is created under `root` (build_cache.py says why). A build another process
    holds is not waited for.
    """
    folder, flags, post = _folder(root, header, cxx, cflags, post_cflags)
    path = HEADERS[header]
    own = header == "bindings"
    if _usable(folder, path, own):
        return folder, True, 0.0
    if not may_build or (folder.exists() and not trusted(folder)):
        return _without_gch(header, scratch), False, 0.0
    make_dirs((folder / path).parent)
    if own and not trusted(folder / path):
        _write_shared(folder / path, BINDINGS)
    with open(folder / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return (folder if own else None), False, 0.0  # another build makes it now: do not wait for it
        if _usable(folder, path, own):
            return folder, True, 0.0
        gch = folder / f"{path}.gch"
        source = folder / path if own else _real_header(path)
        tmp = gch.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
        start = time.perf_counter()
        argv = [cxx, *flags, "-x", "c++-header", str(source), "-o", str(tmp), *post]
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s)
        if done.returncode == 0 and tmp.exists():
            tmp.chmod(FILE_MODE)
            os.replace(tmp, gch)
            return folder, True, time.perf_counter() - start
        tmp.unlink(missing_ok=True)
        return (folder if own else None), False, time.perf_counter() - start


def _folder(root: Path, header: str, cxx: str, cflags: str, post_cflags: str) -> tuple[Path, list, list]:
    """The folder of the `.gch` for these flags, and the flags a header is compiled with."""
    flags = [f for f in shlex.split(cflags) if not f.startswith("-DTORCH_EXTENSION_NAME=")]  # not used by headers
    post = shlex.split(post_cflags)
    digest = hashlib.sha256(json.dumps([cxx, flags, post, header, RECIPE]).encode()).hexdigest()[:24]
    return root / "pch" / digest, flags, post


def folder_for(root: Path, header: str, cxx: str, cflags: str, post_cflags: str) -> Path:
    """Where `precompiled` keeps the `.gch` of `header` for these flags (under `root/pch/`)."""
    return _folder(root, header, cxx, cflags, post_cflags)[0]


def _usable(folder: Path, path: str, own: bool) -> bool:
    """A `.gch` (and for kernelzero's header, the header beside it) that trusted code wrote."""
    parts = [folder.parent, folder, folder / f"{path}.gch"] + ([folder / path] if own else [])
    return all(trusted(p) for p in parts)


def _without_gch(header: str, scratch: Path | None) -> Path | None:
    """The include folder of a build without a shared `.gch`: kernelzero's header written under `scratch`."""
    if header != "bindings":
        return None
    if scratch is None:
        raise ValueError("a build that may not write the shared pch folder needs a private `scratch` folder")
    target = scratch / "kz-include" / HEADERS[header]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(BINDINGS)
    return scratch / "kz-include"


def _write_shared(target: Path, text: str) -> None:
    """Write `text` to `target` atomically, readable by every user (trusted code only)."""
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}-{threading.get_ident()}")  # builds run in threads
    tmp.write_text(text)
    tmp.chmod(FILE_MODE)
    os.replace(tmp, target)

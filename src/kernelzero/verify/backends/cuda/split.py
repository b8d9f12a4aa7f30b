"""Split a `load_inline` CUDA source into torch-free device code and host code (the fast build path).

Why: nvcc spends nearly all of a candidate's build on the torch headers its host wrapper needs
(cudafe++, cicc and the host compiler each parse them; none can use a precompiled header). Kernels
need none of them. `split_cuda(text)` returns two translation units for one CUDA source:

- `device.cu` (nvcc): the source's kernels, `__device__` functions, types, constants and includes,
  without torch's headers, plus one launcher per kernel,
  `void kz_launch_K(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, <K's parameters>)`, whose
  body is the launch `K<<<grid, block, smem, stream>>>(<parameters>)`;
- `host.cpp` (the host compiler, with torch's prelude `torch/types.h` precompiled, torch's nvcc defines and
  nvcc's host -O level capped at -O1): the host functions, with
  each launch `K<<<g, b[, s[, st]]>>>(args)` rewritten to `kz_launch_K(g, b, s or 0, st or 0, args)`,
  plus the same types, constants and includes and the launchers' declarations.

Why the meaning stays: every item keeps its text and its place relative to the others in the unit(s)
it goes to; a launch through a launcher converts the arguments to the kernel's own parameter types,
as the launch did, and launches on the same stream with the same configuration (the defaults of the
omitted `<<<>>>` arguments are 0, as in CUDA); `device.cu` gets the same nvcc flags. Host functions
stay in a translation unit of their own (not main.cpp), so no overload set or static name meets
another unit's. Host code sees torch's prelude as in `cuda.cu`; the source's own `torch/extension.h` includes
are dropped as cuda_build.py's lighter `cuda.cu` drops them, and host code is optimised at -O1 where nvcc
would use -O2/-O3 (host code only checks arguments and launches; a well-defined program means the same at any
level, and -O1 compiles ~20% faster than -O3 on torch's headers: bench/service.md).

The split is refused (None, with a reason) for anything it does not model: templates, namespaces,
`extern "C"`, conditional compilation, global variables (device or host: they would exist twice),
`__host__ __device__` functions, types with device members, kernels used other than by `<<<>>>`,
launches of template instances, raw strings. A split that does not compile is not used either: the
build then compiles the source as written, which decides (cuda_build.py), so a source never changes
from failing to passing or the other way round through this file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelzero.verify.backends.cuda.capture import InlineBuild

# torch's prelude for cuda.cu is torch/types.h, cuda.h, cuda_runtime.h; under nvcc types.h brings cuda_fp16.h
# and cuda_bf16.h, which kernels use without including them
CUDA_HEADERS = "#include <cuda.h>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
PRELUDE_DEVICE = CUDA_HEADERS
PRELUDE_HOST = "#include <torch/types.h>\n" + CUDA_HEADERS  # torch's own prelude for cuda.cu
TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](torch|ATen|c10|pybind11)/")
TORCH_NAME = re.compile(r"\b(torch|at|c10|pybind11)\s*::|\b(TORCH|AT|C10)_[A-Z_]+\b")
LAUNCHER = "kz_launch_"


class Refused(ValueError):
    """The source has something the split does not model."""


@dataclass(frozen=True)
class Split:
    """The two translation units of one CUDA source."""

    device: str  # for nvcc: kernels, device functions, launchers; no torch header
    host: str  # for the host compiler: host functions with launches through launchers
    kernels: tuple[str, ...]  # kernels that got a launcher


def _skip_literal(text: str, i: int) -> int:
    """Index after the string or char literal starting at text[i]."""
    quote = text[i]
    i += 1
    while i < len(text) and text[i] != quote:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _items(text: str) -> list[str]:
    """Top-level items: preprocessor lines, and declarations/definitions up to their `;` or closing `}`."""
    items, start, depth, i, n = [], 0, 0, 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c in "\"'":
            if c == '"' and i > 0 and text[i - 1] == "R":
                raise Refused("raw string literal")
            i = _skip_literal(text, i)
        elif c == "#" and depth == 0 and not _code(text[start:i]).strip():  # comments before it are dropped
            end = i
            while True:
                end = text.find("\n", end)
                if end < 0 or text[end - 1] != "\\":
                    break
                end += 1
            end = n if end < 0 else end
            items.append(text[i:end].strip())
            i = start = end
        elif c in "({[":
            depth += 1
            i += 1
        elif c in ")]":
            depth -= 1
            i += 1
        elif c == "}":
            depth -= 1
            i += 1
            if depth == 0:
                rest = text[i:].lstrip()
                if rest.startswith(";"):  # struct/enum definitions end with `};`
                    i = text.index(";", i) + 1
                elif _is_type_block(text[start:i]):
                    i = text.index(";", i) + 1 if ";" in text[i:] else n
                items.append(text[start:i].strip())
                start = i
        elif c == ";" and depth == 0:
            i += 1
            items.append(text[start:i].strip())
            start = i
        else:
            i += 1
    if text[start:].strip():
        items.append(text[start:].strip())
    return [it for it in items if it]


def _code(item: str) -> str:
    """The item without comments and literals (for looking at its words)."""
    item = re.sub(r"//[^\n]*|/\*.*?\*/", " ", item, flags=re.S)
    return re.sub(r"\"(\\.|[^\"\\])*\"|'(\\.|[^'\\])*'", '""', item)


def _is_type_block(item: str) -> bool:
    head = _code(item).split("{", 1)[0]
    return bool(re.search(r"\b(struct|class|union|enum)\b", head)) and "(" not in head


def _params(signature: str) -> tuple[str, list[str]]:
    """(parameter list text, parameter names) of a function head `... name(params)`."""
    inner = signature[signature.index("(") + 1 : signature.rindex(")")]
    parts = [p.strip() for p in _split_top(inner) if p.strip() and p.strip() != "void"]
    names = []
    for p in parts:
        if "=" in p or "(" in p:
            raise Refused(f"kernel parameter {p!r} (default value or function pointer)")
        m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$", p)
        words = re.findall(r"[A-Za-z_]\w*", p)
        if not m or len(words) < 2 or m.group(1) in ("const", "__restrict__", "int", "float", "double", "char", "bool"):
            raise Refused(f"kernel parameter without a name: {p!r}")
        names.append(m.group(1))
    return ", ".join(parts), names


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets (launch arguments, parameter lists)."""
    out, depth, cur, i = [], 0, [], 0
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = _skip_literal(text, i)
            cur.append(text[i:j])
            i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*<<<")


def _rewrite_launches(item: str, kernels: set[str]) -> str:
    """`K<<<cfg>>>(args)` -> `kz_launch_K(g, b, smem, stream, args)` throughout a host function."""
    out, pos = [], 0
    if _code(item).count("<<<") != item.count("<<<"):  # launches are found in the raw text: none may hide
        raise Refused("`<<<` inside a comment or string")
    for m in LAUNCH.finditer(item):
        name = m.group(1)
        if name not in kernels:
            raise Refused(f"launch of {name!r}, not a kernel of this source (or a template instance)")
        close = item.find(">>>", m.end())
        if close < 0:
            raise Refused("unterminated launch configuration")
        config = [c.strip() for c in _split_top(item[m.end() : close])]
        if not 2 <= len(config) <= 4 or any(not c or "<" in c or ">" in c for c in config):
            raise Refused(f"launch configuration {item[m.end() : close]!r}")
        config += ["0"] * (4 - len(config))
        rest = item[close + 3 :]
        lead = len(rest) - len(rest.lstrip())
        if not rest.lstrip().startswith("("):
            raise Refused("launch without an argument list")
        args_start = close + 3 + lead + 1
        depth, j = 1, args_start
        while depth:
            if j >= len(item):
                raise Refused("unbalanced launch arguments")
            if item[j] in "\"'":
                j = _skip_literal(item, j)
                continue
            depth += {"(": 1, ")": -1}.get(item[j], 0)
            j += 1
        args = item[args_start : j - 1]
        if "{" in args or "<<<" in args:
            raise Refused("launch arguments with braces or nested launches")
        call_args = ", ".join(
            [f"dim3({config[0]})", f"dim3({config[1]})", f"(size_t)({config[2]})", f"(cudaStream_t)({config[3]})"]
            + ([args.strip()] if args.strip() else [])
        )
        out.append(item[pos : m.start()] + f"{LAUNCHER}{name}({call_args})")
        pos = j
    out.append(item[pos:])
    return "".join(out)


def _kind(item: str) -> str:
    """One of: pre, kernel, device_fn, type, const, using, host_fn, host_decl; raises Refused otherwise."""
    code = _code(item)
    words = set(re.findall(r"[A-Za-z_]\w*", code))
    if not item.startswith("#") and re.search(
        r"^\s*#\s*(include|define|undef|if|ifdef|ifndef|elif|else|endif)\b", item, re.M
    ):
        raise Refused("a preprocessor directive inside a declaration or function")
    if item.startswith("#"):
        if re.match(r"#\s*(if|ifdef|ifndef|elif|else|endif)\b", item):
            raise Refused("conditional compilation")
        if re.match(r'#\s*include\s*"', item):
            raise Refused("a local #include")
        return "pre"
    head = code.split("{", 1)[0]
    banned = {"template", "namespace", "__constant__", "__managed__"} | ({"__shared__"} if "(" not in head else set())
    if words & banned or 'extern "C"' in item:
        raise Refused(f"{sorted(words & banned) or 'extern C'}")
    if code.strip().startswith("using"):
        return "using"
    if re.match(r"\s*(typedef|struct|class|union|enum)\b", code):
        if words & {"__device__", "__global__", "__host__"}:
            raise Refused("a type with device members")
        if "}" in code and re.search(r"[A-Za-z_]", code.rsplit("}", 1)[1]):
            raise Refused("a type definition that also declares a variable")
        return "type"
    if "__global__" in words:
        if "__host__" in words or "__device__" in words:
            raise Refused("a kernel marked __host__/__device__")
        return "kernel"
    if "__device__" in words or "__host__" in words:
        if "__host__" in words or "(" not in head:
            raise Refused("__host__ __device__ function or a device variable")
        return "device_fn"
    if "(" in head and (
        code.rstrip().endswith("}") or code.rstrip().endswith(";") and "=" not in head.split("(", 1)[0]
    ):
        return "host_fn" if code.rstrip().endswith("}") else "host_decl"
    if re.match(r"\s*(static\s+)?(constexpr|const)\b", code) or re.search(r"\bconstexpr\b", head):
        return "const"
    raise Refused(f"a global variable or unknown item: {item[:60]!r}")


def split_cuda(text: str) -> Split:
    """The device and host units of one CUDA source; raises Refused when it cannot be split safely."""
    if LAUNCHER in text:
        raise Refused(f"the source already uses the name prefix {LAUNCHER}")
    items = [(it, _kind(it)) for it in _items(text)]
    kernels = {_name(it) for it, k in items if k == "kernel"}
    if not kernels:
        raise Refused("no kernel")
    device, host = [PRELUDE_DEVICE], [PRELUDE_HOST]
    for item, kind in items:
        code = _code(item)
        if (
            kind in ("kernel", "device_fn")
            or (kind == "pre" and not TORCH_INCLUDE.match(item))
            or kind in ("type", "const")
        ):
            if kind != "pre" and TORCH_NAME.search(code):
                raise Refused(f"device-side code names torch: {item[:60]!r}")
            device.append(item)
        if kind in ("pre", "type", "const", "using", "host_fn", "host_decl"):
            host.append(_rewrite_launches(item, kernels) if kind == "host_fn" else item)
        if kind == "using" and not TORCH_NAME.search(code) and not re.search(r"\b(torch|at|c10)\b", code):
            device.append(item)
        if kind == "kernel":
            head = _clean_head(item.split("{", 1)[0] if item.rstrip().endswith("}") else item.rstrip(";"))
            name = _name(item)
            params, names = _params(head)
            signature = f"void {LAUNCHER}{name}(dim3 kz_grid, dim3 kz_block, size_t kz_smem, cudaStream_t kz_stream" + (
                f", {params})" if params else ")"
            )
            host.append(signature + ";")
            if item.rstrip().endswith("}"):
                device.append(
                    f"{signature} {{\n    {name}<<<kz_grid, kz_block, kz_smem, kz_stream>>>({', '.join(names)});\n}}"
                )
    uses = re.compile(r"\b(" + "|".join(map(re.escape, sorted(kernels))) + r")\b")
    for item, kind in items:
        if kind != "kernel" and kind != "pre" and uses.search(LAUNCH.sub("", _code(item))):
            raise Refused("a kernel used other than by a `<<<>>>` launch in host code")
    return Split("\n".join(device) + "\n", "\n".join(host) + "\n", tuple(sorted(kernels)))


def _name(item: str) -> str:
    m = re.search(r"([A-Za-z_]\w*)\s*\(", _clean_head(_code(item).split("{", 1)[0]))
    if not m or m.group(1) in ("__attribute__", "__declspec"):
        raise Refused("a kernel whose name cannot be read")
    return m.group(1)


def _clean_head(head: str) -> str:
    """A kernel's head without `__launch_bounds__(...)` (its arguments are not parameters)."""
    return re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", _code(head))


# ------------------------------------------------------------------------------------------- builds


# Flags whose effect on a split is known: they set device code generation or host -O (which host.cpp gets,
# below), or warnings. Any other flag (-D, -U, -I, -Xcompiler, ...) could mean something to the host code that
# moves to host.cpp, so its source is built as written.
SAFE_CUDA_FLAG = re.compile(
    r"-O\d?|--use_fast_math|-use_fast_math|-lineinfo|--expt-relaxed-constexpr|"
    r"--expt-extended-lambda|-std=c\+\+\d+|-w|-Xptxas[= ].*|--ptxas-options[= ].*|"
    r"-maxrregcount[= ]?\d+|--maxrregcount[= ]?\d+|-res-usage|--resource-usage|"
    r"-(gencode|arch|code)[= ].*|--generate-code[= ].*|-ftz=(true|false)|-prec-(div|sqrt)=(true|false)|"
    r"-fmad=(true|false)"
)
SAFE_CXX_FLAG = re.compile(r"-O\d?|-std=c\+\+\d+|-w|-W[\w=-]*|-g\d?")


def host_defines_and_opt(build: InlineBuild, cflags: str) -> str:
    """Flags for host.cpp: what nvcc's host pass gave its code, torch's nvcc defines (`__CUDA_NO_HALF_*`) and the
    -O level (nvcc's last -O flag, capped at -O1; without one nvcc passes none, so -O0 overrides a C++ -O)."""
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    levels = [f for f in build.extra_cuda_cflags if re.fullmatch(r"-O\d?", f)]
    opt = levels[-1] if levels else "-O0" if re.search(r"(^| )-O", cflags) else ""
    if opt in ("-O2", "-O3"):  # host code only launches: -O1 costs like -O0 to compile, -O3 ~25% more
        opt = "-O1"
    return " ".join([f for f in COMMON_NVCC_FLAGS if f.startswith("-D")] + ([opt] if opt else []))


def split_sources(build: InlineBuild, folder: Path) -> list[Path] | None:
    """Write the split units (cuda_split.py) beside main.cpp; None when the split is refused."""
    if (
        not all(SAFE_CUDA_FLAG.fullmatch(f) for f in build.extra_cuda_cflags)
        or not all(SAFE_CXX_FLAG.fullmatch(f) for f in build.extra_cflags)
        or build.extra_include_paths
    ):
        return None
    try:
        units = split_cuda("\n".join(build.cuda_sources))
    except Refused:
        return None
    (folder / "host.cpp").write_text(units.host)
    (folder / "device.cu").write_text(units.device)
    return [folder / "main.cpp", folder / "host.cpp", folder / "device.cu"]

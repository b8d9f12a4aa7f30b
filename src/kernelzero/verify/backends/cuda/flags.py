"""Which of a candidate's compiler flags a compile check passes on (an allowlist).

Candidate flags are split as torch's ninja file splits them; the candidate's own target-architecture
flags are dropped in favour of the check's target, and flags that could run or redirect tools
(`-ccbin`, `--run`, `-o`, `-fplugin`, `-Wl,`, `-specs`, ...) are dropped and reported back.
"""

from __future__ import annotations

import re
import shlex

_HOST_FLAG = re.compile(
    r"-O([0-3sgz]|fast)?|-[DU][A-Za-z_]\w*(=\S*)?|-I[^-\s]\S*|-std=(c|gnu)\+\+\w+|-w|-W[A-Za-z][\w-]*(=[\w-]+)?"
    r"|-g\d?|-pthread|-f(?!plugin)[a-z][\w-]*(=[\w.+-]+)?|-m[a-z][\w-]*(=[\w.+-]+)?"
)
_NVCC_FLAG = re.compile(
    r"-O[0-3]?|-[DU][A-Za-z_]\w*(=\S*)?|-I[^-\s]\S*|--?std=c\+\+\w+|-w|-g|-G|-lineinfo|--generate-line-info"
    r"|--?use_fast_math|--?expt-relaxed-constexpr|--?expt-extended-lambda|--?extended-lambda|--?restrict"
    r"|--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)|--?maxrregcount=\d+|-res-usage|--resource-usage"
    r"|--?default-stream=(legacy|null|per-thread)|--?extra-device-vectorization|--?disable-warnings"
    r"|--?diag-suppress=[\w,]+"
)
_PTXAS_FLAG = re.compile(
    r"-v|--verbose|-O[0-3]|--?warn-on-(spills|local-memory-usage|double-precision-use)"
    r"|--?allow-expensive-optimizations(=(true|false))?|-dlcm=\w+|-dscm=\w+|--?maxrregcount=\d+"
    r"|--?def-(load|store)-cache=\w+|--?fmad=(true|false)"
)
_ARCH_FLAG = re.compile(r"(-arch|--gpu-architecture|-gencode|--generate-code|-code|--gpu-code)(=\S+)?")
_PAIRED = {  # flags whose value may come as the next token -> how to check the value
    "-maxrregcount": re.compile(r"\d+"),
    "--maxrregcount": re.compile(r"\d+"),
    "-default-stream": re.compile(r"legacy|null|per-thread"),
    "--default-stream": re.compile(r"legacy|null|per-thread"),
}


def filter_flags(flags: tuple[str, ...], *, nvcc: bool) -> tuple[list[str], list[str]]:
    """Split candidate flags into (kept, dropped) by an allowlist; for nvcc, target-arch flags are dropped.

    Each flag string is shell-split first, as torch's ninja file does (`"-Xptxas -v"` is two tokens).
    """
    tokens: list[str] = []
    dropped: list[str] = []
    for flag in flags:
        try:
            tokens += shlex.split(flag)
        except ValueError:
            dropped.append(flag)
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        token, value = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
        taken = _accept(token, value, nvcc)
        if taken is None:
            dropped.append(token)
            i += 1
        elif _ARCH_FLAG.fullmatch(token) and nvcc:
            dropped += tokens[i : i + len(taken)]
            i += len(taken)
        else:
            kept += taken
            i += len(taken)
    return kept, dropped


def _accept(token: str, value: str | None, nvcc: bool) -> list[str] | None:
    """The tokens this flag takes (itself, maybe its value) if allowed, else None."""
    if not nvcc:
        return [token] if _HOST_FLAG.fullmatch(token) else None
    if _NVCC_FLAG.fullmatch(token):
        return [token]
    if _ARCH_FLAG.fullmatch(token):
        return [token] if "=" in token or value is None else [token, value]
    for name, subflags in (
        ("-Xptxas", _PTXAS_FLAG),
        ("--ptxas-options", _PTXAS_FLAG),
        ("-Xcompiler", _HOST_FLAG),
        ("--compiler-options", _HOST_FLAG),
    ):
        if token == name and value is not None and _all_match(value, subflags):
            return [token, value]
        if token.startswith(name + "=") and _all_match(token[len(name) + 1 :], subflags):
            return [token]
    if token in _PAIRED and value is not None and _PAIRED[token].fullmatch(value):
        return [token, value]
    return None


def _all_match(value: str, pattern: re.Pattern) -> bool:
    return all(pattern.fullmatch(part) for part in value.split(","))

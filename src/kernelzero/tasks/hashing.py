"""Stable hashes of tasks.

A task's hash names it in caches, baselines and result records, so it must not change when a file is
re-indented, re-commented or moved, and must change when anything that runs changes. The source is
normalised with the tokenizer (stable across Python versions, unlike `ast.unparse`): comments and
blank lines dropped, each logical line re-joined with single spaces, indentation kept as depth. Size
overrides and per-task tolerances are part of what runs, so they enter the hash too.
"""

from __future__ import annotations

import hashlib
import io
import json
import tokenize

from kernelzero.types import Task

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


def normalise_source(source: str) -> str:
    """Source reduced to its tokens: no comments, no blank lines, canonical spacing.

    >>> normalise_source("x = 1  # one\\n\\n\\ny=(1 +\\n 2)\\n")
    'x = 1\\ny = ( 1 + 2 )'
    """
    lines: list[str] = []
    current: list[str] = []
    depth = 0
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        # Unparseable text still needs a stable hash: fall back to stripped lines.
        return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())
    for tok in tokens:
        if tok.type in _SKIP:
            continue
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type == tokenize.NEWLINE:
            if current:
                lines.append("  " * depth + " ".join(current))
            current = []
        else:
            current.append(tok.string)
    if current:
        lines.append("  " * depth + " ".join(current))
    return "\n".join(lines)


def source_hash(source: str) -> str:
    """sha256 (hex, 16 chars) of the normalised source."""
    return hashlib.sha256(normalise_source(source).encode()).hexdigest()[:16]


def task_hash(task: Task) -> str:
    """Hash of everything about a task that changes what runs: source, size overrides, tolerances."""
    payload = {
        "source": normalise_source(task.source),
        "sizes": dict(sorted(task.sizes.items())),
        "atol": task.atol,
        "rtol": task.rtol,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

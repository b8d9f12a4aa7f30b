"""Pull the candidate's code out of a model completion.

Rules, in order: drop `<think>...</think>` sections (and an unclosed `<think>` up to the first
fence); take the last fenced block labelled python (or py), else the last fenced block of any
label, else the whole remaining text. KernelBench takes the first block; kernelzero takes the last,
since models often show the reference or a draft before their answer.
"""

from __future__ import annotations

import re

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)


def extract_code(completion: str) -> str:
    """The code a completion offers (may be empty)."""
    text = _THINK.sub("", completion)
    if "<think>" in text:  # an unclosed thinking section: keep only what follows it, if a fence follows
        head, _, tail = text.partition("<think>")
        text = head + (tail[tail.find("```"):] if "```" in tail else "")
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    if not blocks and text.count("```") == 1:  # an opening fence that never closes (cut-off output)
        body = text.split("```", 1)[1]
        return body.split("\n", 1)[1] if "\n" in body else ""
    python = [body for label, body in blocks if label in ("python", "py", "python3")]
    if python:
        return python[-1]
    if blocks:
        return blocks[-1][1]
    return text.strip() + "\n" if text.strip() else ""

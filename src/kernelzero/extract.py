"""Pull the candidate's code out of a model completion.

    from kernelzero.extract import extract_code
    code = extract_code(completion)          # "" when the completion offers no code

Rules, in order:
1. Thinking is dropped: `<think>...</think>` sections; text before a `</think>` that has no opening
   tag (chat templates that open the section in the prompt); an unclosed `<think>` up to the first
   fence after it (output cut off while thinking, then code, is kept; thinking alone gives "").
2. Fenced blocks are the lines between a line starting with ``` and the next such line. A fence
   opened after the last closed block and never closed (output cut off mid-answer) counts as a
   block running to the end of the text.
3. The last block labelled python (or py, python3) wins, else the last block of any label, else
   the whole remaining text (a bare module).

KernelBench takes the first block; kernelzero takes the last, since models often show the reference
or a draft before their answer. The verifier (`kernelzero.verify`) imports this function too.
"""

from __future__ import annotations

import re

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*(?:\n(.*))?\Z", re.DOTALL | re.MULTILINE)
_PYTHON_LABELS = ("python", "py", "python3")


def _drop_thinking(completion: str) -> str:
    text = _THINK.sub("", completion)
    if "</think>" in text:  # the opening tag was part of the prompt: everything before the close is thinking
        text = text.rpartition("</think>")[2]
    if "<think>" in text:  # an unclosed thinking section: keep only what follows it, if a fence follows
        head, _, tail = text.partition("<think>")
        text = head + (tail[tail.find("```") :] if "```" in tail else "")
    return text


def _blocks(text: str) -> list[tuple[str, str]]:
    """(label, body) of each fenced block, a trailing unclosed one included."""
    blocks: list[tuple[str, str]] = []
    end = 0
    for m in _FENCE.finditer(text):
        blocks.append((m.group(1).lower(), m.group(2)))
        end = m.end()
    cut = _OPEN_FENCE.search(text, end)
    if cut:
        blocks.append((cut.group(1).lower(), cut.group(2) or ""))
    return blocks


def extract_code(completion: str) -> str:
    """The code a completion offers (may be empty)."""
    text = _drop_thinking(completion)
    blocks = _blocks(text)
    python = [body for label, body in blocks if label in _PYTHON_LABELS]
    if python:
        return python[-1]
    if blocks:
        return blocks[-1][1]
    return text.strip() + "\n" if text.strip() else ""

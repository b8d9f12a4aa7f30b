"""The Proposer's prompt: given an API set (and optionally the Coder's failure notes), write a module.

    from kernelzero.proposer.prompts import build_messages, PROMPT_VERSION
    messages = build_messages(("gelu", "layer_norm", "linear"), failure_notes=["mismatch: max abs diff 0.3"])

The text lives in `templates/` (package data): `system.txt`, `user.txt` and the worked example
`example.py` (a real module: tests/proposer checks that it passes admission's syntax stage for its APIs).
The user message lists each API with its category (from apis.json), states the KernelBench contract and what
admission checks (every API used, few others, GPU-sized, informative and precision-stable outputs), and,
when the API set comes from the frontier, the Coder's failure notes on an earlier module of that set, so the
Proposer can aim at what the Coder gets wrong. Any change to a template must bump PROMPT_VERSION, which
every proposal records.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources

from kernelzero.proposer.catalog import api_table

PROMPT_VERSION = "proposer-v1"
TEMPLATE_VERSION = "template-v1"  # the template generator (generator.py, genops.py) in place of a prompt
_SLOTS = ("{{apis}}", "{{failure_notes}}", "{{example}}", "{{api_names}}")
MAX_NOTES = 5
NOTE_CHARS = 300


@functools.cache
def load_template(name: str) -> str:
    """The text of one file of `kernelzero/proposer/templates/`."""
    return (resources.files("kernelzero.proposer") / "templates" / name).read_text(encoding="utf-8")


def _notes_section(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    lines = [f"- {' '.join(n.split())[:NOTE_CHARS]}" for n in list(notes)[:MAX_NOTES]]
    return (
        "\nA kernel-writing model often failed on an earlier module built from these APIs. Its failures:\n"
        + "\n".join(lines)
        + "\nWrite a new module (not a copy of that one) that exercises the same difficulty.\n"
    )


def build_user_message(apis: Sequence[str], failure_notes: Sequence[str] = ()) -> str:
    """The user message for one API set."""
    if len(apis) < 1:
        raise ValueError("an API set needs at least one API")
    template = load_template("user.txt")
    missing = [slot for slot in _SLOTS if slot not in template]
    if missing:
        raise ValueError(f"template user.txt lacks {missing}")
    table = api_table()
    listing = "\n".join(f"- `{a}` ({table.category_of(a)})" for a in apis)
    example = load_template("example.py")
    text = template.replace("{{example}}", example if example.endswith("\n") else example + "\n")
    text = text.replace("{{failure_notes}}", _notes_section(failure_notes))
    text = text.replace("{{api_names}}", ", ".join(apis))
    return text.replace("{{apis}}", listing)  # last: nothing in an API name is taken for a slot


def build_messages(apis: Sequence[str], failure_notes: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages asking for a KernelBench-format module using every API of `apis`."""
    return [
        {"role": "system", "content": load_template("system.txt").strip()},
        {"role": "user", "content": build_user_message(apis, failure_notes)},
    ]

"""The Coder's one-shot prompt: a system message and a user message per backend.

    from kernelzero.coder.prompts import build_messages, PROMPT_VERSIONS
    messages = build_messages(task, "triton")   # [{"role": "system", ...}, {"role": "user", ...}]

The text lives in `templates/` (package data): `system_<backend>.txt`, `user_<backend>.txt`, and one
worked example shared by the backends: the reference `example_model.py` and its answers
`example_cuda.py` / `example_triton.py` / `example_helion.py`. The examples are real code: tests/coder checks that
the Triton and Helion answers pass `kernelzero verify` on CPU, and the CUDA answer compile-checks.

The user message states the contract KernelBench's harness (and ours) relies on: a class named
`ModelNew`, built as `ModelNew(*get_init_inputs())`, with `Model`'s forward inputs and outputs, real
custom kernels rather than PyTorch fallbacks, and one fenced python block as the answer
(`coder.extract.extract_code` takes the last one). Any change to a template must bump its entry in
`PROMPT_VERSIONS`, which every Sample records.
"""

from __future__ import annotations

import functools
from importlib import resources

from kernelzero.types import Task

# Bump on any change to a backend's templates or example: samples record the version they were made with.
PROMPT_VERSIONS = {"cuda": "cuda-v1", "triton": "triton-v1", "helion": "helion-v1"}

_SLOTS = ("{{example_model}}", "{{example_new}}", "{{task_source}}")


@functools.cache
def load_template(name: str) -> str:
    """The text of one file of `kernelzero/coder/templates/` (package data)."""
    return (resources.files("kernelzero.coder") / "templates" / name).read_text(encoding="utf-8")


def _check_backend(backend: str) -> None:
    if backend not in PROMPT_VERSIONS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(sorted(PROMPT_VERSIONS))}")


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def build_user_message(source: str, backend: str) -> str:
    """The user message for a reference module's source (the task text goes in unchanged)."""
    _check_backend(backend)
    template = load_template(f"user_{backend}.txt")
    missing = [slot for slot in _SLOTS if slot not in template]
    if missing:
        raise ValueError(f"template user_{backend}.txt lacks {missing}")
    text = template.replace("{{example_model}}", _with_newline(load_template("example_model.py")))
    text = text.replace("{{example_new}}", _with_newline(load_template(f"example_{backend}.py")))
    # The task goes in last, so nothing in its source is ever taken for a slot.
    return text.replace("{{task_source}}", _with_newline(source))


def build_messages(task: Task, backend: str) -> list[dict[str, str]]:
    """Chat messages asking for a `ModelNew` of `task` with `backend` ("cuda", "triton" or "helion") kernels."""
    _check_backend(backend)
    return [
        {"role": "system", "content": load_template(f"system_{backend}.txt").strip()},
        {"role": "user", "content": build_user_message(task.source, backend)},
    ]

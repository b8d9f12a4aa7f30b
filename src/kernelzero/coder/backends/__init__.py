"""Generation backends, chosen by a model spec string.

    from kernelzero.coder.backends import load_backend, GenRequest, SamplingParams
    backend = load_backend("openai:qwen2.5-coder-7b", base_url="http://localhost:8000/v1", concurrency=32)
    results = backend.generate([GenRequest("level1/1_Matmul", messages)], SamplingParams(n=4), on_done=save)

| spec | backend | needs |
|---|---|---|
| `openai:MODEL` | an OpenAI-compatible HTTP server (`openai.py`) | nothing (standard library) |
| `hf:PATH_OR_ID` | transformers on this machine's CPU or GPU (`hf.py`) | extra `hf` |
| `vllm:PATH_OR_ID` | vLLM's offline engine (`vllm.py`, untested without a GPU) | vllm |
| `replay:FILE.jsonl` | completions stored in a JSONL file (`replay.py`) | nothing |

Options are keyword arguments of the backend's class. The interface (`Backend`, `GenRequest`,
`SamplingParams`, `Generation`) is in `base.py`. Heavy libraries are imported only when a backend
that needs them is built.
"""

from __future__ import annotations

from typing import Any

from kernelzero.coder.backends.base import Backend, Generation, GenRequest, OnDone, SamplingParams
from kernelzero.coder.backends.hf import HFBackend
from kernelzero.coder.backends.openai import OpenAIBackend
from kernelzero.coder.backends.replay import ReplayBackend
from kernelzero.coder.backends.vllm import VLLMBackend

BACKENDS = {"openai": OpenAIBackend, "hf": HFBackend, "vllm": VLLMBackend, "replay": ReplayBackend}

__all__ = ["BACKENDS", "Backend", "GenRequest", "Generation", "OnDone", "SamplingParams", "load_backend"]


def load_backend(spec: str, **options: Any) -> Backend:
    """The backend a model spec names ("openai:MODEL", "hf:PATH", "vllm:PATH", "replay:FILE.jsonl")."""
    prefix, sep, rest = spec.partition(":")  # only the first colon: model names may hold more ("qwen:7b")
    if prefix not in BACKENDS:
        valid = ", ".join(f"{name}:..." for name in BACKENDS)
        raise ValueError(f"unknown model spec {spec!r}; valid prefixes: {valid}")
    if not sep or not rest:
        raise ValueError(f"model spec {spec!r} names no model: write {prefix}:MODEL_OR_PATH")
    return BACKENDS[prefix](rest, **options)

"""The Coder's side of evaluation and training: prompts, code extraction, generation backends.

    from kernelzero.coder import build_messages, PROMPT_VERSIONS, extract_code, load_backend
    from kernelzero.coder import GenRequest, SamplingParams

This package never runs generated code (that is `verify/`'s job); it only writes prompts, talks to
models and cuts code out of their answers.
"""

from __future__ import annotations

from kernelzero.coder.backends import Generation, GenRequest, SamplingParams, load_backend
from kernelzero.coder.prompts import PROMPT_VERSIONS, build_messages
from kernelzero.extract import extract_code

__all__ = [
    "PROMPT_VERSIONS",
    "GenRequest",
    "Generation",
    "SamplingParams",
    "build_messages",
    "extract_code",
    "load_backend",
]

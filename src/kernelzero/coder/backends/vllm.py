"""`vllm:PATH_OR_ID`: vLLM's offline engine, `LLM(model=...).chat(...)`, on the GPUs of this machine.

    backend = load_backend("vllm:/models/qwen2.5-coder-7b", tensor_parallel_size=2, max_model_len=16384)

UNTESTED HERE: vLLM needs a CUDA GPU and its own torch build, so it is neither installed nor
exercised on the CPU machines that run kernelzero's tests. The code is a thin call of vLLM's public
API (options other than `chunk_size` go to `vllm.LLM` as engine arguments); check it on a GPU machine
before relying on it, and prefer `openai:` against `vllm serve` when in doubt.

Requests go to the engine `chunk_size` at a time (one `SamplingParams` per request, with `n` = its
sample count and `seed` = seed + its first sample index), so `on_done` fires once per chunk.
vLLM reports exact prompt and output token counts and the finish reason of every sample.
Unset sampling fields (top_k, repetition_penalty) take vLLM's defaults, not the model's
generation_config.json.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kernelzero.coder.backends.base import (
    Generation,
    GenRequest,
    OnDone,
    SamplingParams,
    check_requests,
    sorted_results,
)


class VLLMBackend:
    """Offline batched generation with vLLM (untested here, see the module docstring)."""

    def __init__(self, path: str, *, chunk_size: int = 256, **engine_options: Any) -> None:
        try:
            import vllm
        except ImportError as exc:
            raise ImportError("the vllm: backend needs vLLM on a CUDA machine: pip install vllm") from exc
        self.spec = f"vllm:{path}"
        self.chunk_size = chunk_size
        self.warnings: list[str] = []
        self._vllm = vllm
        self.llm = vllm.LLM(model=path, **engine_options)

    def generate(
        self, requests: Sequence[GenRequest], params: SamplingParams, on_done: OnDone | None = None
    ) -> dict[str, list[Generation]]:
        check_requests(requests)
        self.warnings = []
        results: dict[str, list[Generation]] = {req.key: [] for req in requests}
        for start in range(0, len(requests), self.chunk_size):
            chunk = list(requests[start : start + self.chunk_size])
            idxs = [req.indices(params) for req in chunk]
            sampling = [
                self._vllm.SamplingParams(
                    n=len(ix),
                    temperature=params.temperature,
                    top_p=params.top_p,
                    max_tokens=params.max_tokens,
                    seed=params.seed_for(ix[0]),
                )
                for ix in idxs
            ]
            t0 = time.monotonic()
            outputs = self.llm.chat([list(req.messages) for req in chunk], sampling_params=sampling, use_tqdm=False)
            share = (time.monotonic() - t0) / max(1, sum(map(len, idxs)))
            for req, ix, out, sp in zip(chunk, idxs, outputs, sampling):
                gens = [
                    Generation(
                        text=o.text,
                        output_tokens=len(o.token_ids),
                        prompt_tokens=len(out.prompt_token_ids or []),
                        finish_reason=o.finish_reason or "",
                        seconds=share,
                        sample_idx=i,
                        seed=sp.seed,
                    )
                    for i, o in zip(ix, sorted(out.outputs, key=lambda o: o.index))
                ]
                results[req.key].extend(gens)
                if on_done is not None:
                    on_done(req, gens)
        return sorted_results(results)

"""`hf:PATH_OR_ID`: a local transformers model (`AutoModelForCausalLM` + `AutoTokenizer`), CPU or GPU.

    backend = load_backend("hf:/models/qwen2.5-coder-7b", device="cuda", batch_size=16)

Needs the `hf` extra (`pip install 'kernelzero[hf]'`); transformers is imported only when the
backend is built. A hub id works where the model is already cached or the network is reachable;
nothing here downloads on its own account.

Each prompt is the tokenizer's chat template with the generation prompt added. Samples of all
requests are flattened and generated `batch_size` at a time (left padding), so `on_done` fires once
per batch. Token counts are exact: prompt tokens without padding, output tokens up to and including
the first end-of-sequence token (finish_reason "stop"), or all of them when none came ("length").

Sampling: `temperature`, `top_p` and `max_tokens` come from SamplingParams; anything else (top_k,
repetition_penalty) from the model's generation_config.json unless `generation_kwargs` overrides it.
transformers samples with the global torch RNG, so a seeded call seeds it once per batch
(seed + index of the batch's first sample): results repeat for the same requests and batch size.
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


def _import_transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise ImportError("the hf: backend needs transformers: pip install 'kernelzero[hf]'") from exc
    return transformers


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


class HFBackend:
    """Batched sampling from a transformers causal LM."""

    def __init__(
        self,
        path: str,
        *,
        device: str | None = None,
        dtype: str = "auto",
        batch_size: int = 8,
        trust_remote_code: bool = False,
        generation_kwargs: dict | None = None,
    ) -> None:
        transformers = _import_transformers()
        import torch

        if batch_size < 1:
            raise ValueError(f"hf backend: batch_size must be >= 1, got {batch_size}")
        self.spec = f"hf:{path}"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size
        self.generation_kwargs = dict(generation_kwargs or {})
        self.warnings: list[str] = []
        tok = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        tok.padding_side = "left"  # generated tokens must follow every prompt directly
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        self.tokenizer = tok
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, trust_remote_code=trust_remote_code
        )
        self.model = model.to(self.device).eval()
        self.eos_ids = sorted(set(_as_list(model.generation_config.eos_token_id)) | set(_as_list(tok.eos_token_id)))

    def _prompt(self, req: GenRequest) -> str:
        return self.tokenizer.apply_chat_template(list(req.messages), tokenize=False, add_generation_prompt=True)

    def _generate_batch(self, prompts: list[str], params: SamplingParams, seed: int | None) -> tuple[Any, Any, float]:
        import torch

        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        sampling: dict[str, Any] = {"do_sample": False}
        if params.temperature > 0:
            sampling = {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p}
        if seed is not None:
            torch.manual_seed(seed)
        start = time.monotonic()
        with torch.no_grad():
            out = self.model.generate(
                **enc,
                **sampling,
                max_new_tokens=params.max_tokens,
                eos_token_id=self.eos_ids,
                pad_token_id=self.tokenizer.pad_token_id,
                **self.generation_kwargs,
            )
        return enc, out[:, enc["input_ids"].shape[1] :], time.monotonic() - start

    def _to_generation(
        self, new_ids: list[int], prompt_tokens: int, seconds: float, idx: int, seed: int | None
    ) -> Generation:
        stop = next((k for k, t in enumerate(new_ids) if t in self.eos_ids), None)
        count = len(new_ids) if stop is None else stop + 1
        text = self.tokenizer.decode(new_ids[:count], skip_special_tokens=True)
        return Generation(
            text=text,
            output_tokens=count,
            prompt_tokens=prompt_tokens,
            finish_reason="length" if stop is None else "stop",
            seconds=seconds,
            sample_idx=idx,
            seed=seed,
        )

    def generate(
        self, requests: Sequence[GenRequest], params: SamplingParams, on_done: OnDone | None = None
    ) -> dict[str, list[Generation]]:
        check_requests(requests)
        self.warnings = []
        prompts = {req.key: self._prompt(req) for req in requests}
        jobs = [(req, idx) for req in requests for idx in req.indices(params)]
        results: dict[str, list[Generation]] = {req.key: [] for req in requests}
        for start in range(0, len(jobs), self.batch_size):
            chunk = jobs[start : start + self.batch_size]
            seed = params.seed_for(start)
            enc, new, seconds = self._generate_batch([prompts[req.key] for req, _ in chunk], params, seed)
            finished: dict[str, list[Generation]] = {}
            for row, (req, idx) in enumerate(chunk):
                gen = self._to_generation(
                    new[row].tolist(), int(enc["attention_mask"][row].sum()), seconds / len(chunk), idx, seed
                )
                finished.setdefault(req.key, []).append(gen)
            for req, _ in chunk:
                gens = finished.pop(req.key, None)
                if gens:
                    results[req.key].extend(gens)
                    if on_done is not None:
                        on_done(req, gens)
        return sorted_results(results)

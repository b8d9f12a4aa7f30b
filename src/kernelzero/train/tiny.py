"""A small Qwen2-architecture policy and its tokenizer, built locally (nothing is downloaded).

    tok = build_tokenizer(corpus_texts, vocab_size=1024)          # byte-level BPE with a ChatML template
    model = build_model(ModelConfig(hidden_size=64, layers=2), tok)
    save_policy(model, tok, Path("runs/x/init"))                  # a folder `hf:` backends and TRL can load

The tokenizer is a byte-level BPE (every string encodes, no unknown token) fitted on the texts the model will
see: Coder prompts and kernels. Its chat template is ChatML (`<|im_start|>role ... <|im_end|>`), the format
of Qwen2.5 models, and `<|im_end|>` ends an answer. Used for the CPU test run and the GPU miniature.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelzero.train.config import ModelConfig

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 1024) -> Any:
    """A `PreTrainedTokenizerFast` (byte-level BPE, ChatML template, left padding) fitted on `corpus`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 300:
        raise ValueError(f"vocab_size must be >= 300 (256 bytes + special tokens + merges), got {vocab_size}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|im_start|>", "<|endoftext|>"],
        model_max_length=1 << 16,
        padding_side="left",
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    return hf_tok


def build_model(cfg: ModelConfig, tokenizer: Any) -> Any:
    """A randomly initialised `Qwen2ForCausalLM` of the configured size (seeded by `cfg.seed`)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(cfg.seed)
    model = Qwen2ForCausalLM(config)
    # pure temperature sampling (top_k 0: transformers' default is 50), as TRL's GRPO samples, so held-out pass@1 and
    # the probes (HF generate with this config) draw from the distribution that training draws from
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True, top_k=0
    )
    return model


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def save_policy(model: Any, tokenizer: Any, path: Path) -> Path:
    """Save model and tokenizer into one folder (what `hf:PATH` and `GRPOTrainer(model=PATH)` load)."""
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path

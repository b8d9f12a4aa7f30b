"""The `hf:` backend with a tiny random Qwen2 model and a BPE tokenizer built here (tests/coder/tiny_hf.py).

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/coder/test_backend_hf.py -q` (a few seconds;
skipped without transformers, the `hf` extra).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from tiny_hf import build_tiny_qwen2  # noqa: E402

from kernelzero.coder.backends import GenRequest, SamplingParams, load_backend  # noqa: E402

PROMPTS = {
    "short": [{"role": "user", "content": "Write a kernel."}],
    "long": [
        {"role": "system", "content": "You write Triton kernels."},
        {"role": "user", "content": "Rewrite this module with a fused kernel, please."},
    ],
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # A 100k-parameter model gains nothing from intra-op threads, and on a busy CI machine two threads
    # made generation ten times slower (5.8 s against 0.5 s for 3 x 16 tokens).
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="module")
def backend(tiny_model):
    return load_backend(f"hf:{tiny_model}", device="cpu", batch_size=3)


def chat_token_count(backend, messages) -> int:
    ids = backend.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    return len(ids["input_ids"])


def test_two_samples_for_two_prompts_with_token_counts(backend):
    requests = [GenRequest(key, messages) for key, messages in PROMPTS.items()]
    done: list[tuple[str, list[int]]] = []

    def on_done(req, gens):
        done.append((req.key, [g.sample_idx for g in gens]))

    results = backend.generate(requests, SamplingParams(n=2, max_tokens=16, seed=1), on_done=on_done)
    # 4 samples in batches of 3: the first batch ends with the first sample of "long".
    assert done == [("short", [0, 1]), ("long", [0]), ("long", [1])]
    for key, messages in PROMPTS.items():
        gens = results[key]
        assert [g.sample_idx for g in gens] == [0, 1]
        for g in gens:
            assert g.ok and isinstance(g.text, str)
            assert g.prompt_tokens == chat_token_count(backend, messages)  # padding not counted
            assert g.finish_reason in ("stop", "length")
            assert g.output_tokens == 16 if g.finish_reason == "length" else 1 <= g.output_tokens <= 16
            assert g.seconds > 0
    assert results["short"][0].prompt_tokens < results["long"][0].prompt_tokens


def test_seeded_sampling_repeats_and_greedy_is_deterministic(backend):
    requests = [GenRequest(key, messages) for key, messages in PROMPTS.items()]
    a = backend.generate(requests, SamplingParams(n=2, max_tokens=8, seed=5))
    b = backend.generate(requests, SamplingParams(n=2, max_tokens=8, seed=5))
    assert [g.text for g in a["short"]] == [g.text for g in b["short"]]
    greedy = backend.generate(requests, SamplingParams(n=2, max_tokens=8, temperature=0))
    assert greedy["long"][0].text == greedy["long"][1].text


def test_end_of_sequence_stops_a_sample(tiny_model, tmp_path):
    # Make every token an end-of-sequence token: each sample then stops after exactly one token.
    config = json.loads((tiny_model / "generation_config.json").read_text())
    vocab = json.loads((tiny_model / "config.json").read_text())["vocab_size"]
    for f in tiny_model.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "generation_config.json").write_text(json.dumps({**config, "eos_token_id": list(range(vocab))}))
    backend = load_backend(f"hf:{tmp_path}", device="cpu")
    gens = backend.generate([GenRequest("p", PROMPTS["short"])], SamplingParams(n=2, max_tokens=16, seed=0))["p"]
    assert [(g.finish_reason, g.output_tokens) for g in gens] == [("stop", 1), ("stop", 1)]


def test_resumed_run_asks_only_for_missing_samples(backend):
    gens = backend.generate(
        [GenRequest("p", PROMPTS["short"], sample_idxs=(2, 3))], SamplingParams(n=4, max_tokens=4, seed=0)
    )["p"]
    assert [g.sample_idx for g in gens] == [2, 3]

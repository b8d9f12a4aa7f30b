"""The supervised warm start (train/warm_start.py): loss only on the answer, and its three stopping rules."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from kernelzero.train.config import ModelConfig, WarmStartConfig  # noqa: E402
from kernelzero.train.miniature import make_tasks  # noqa: E402
from kernelzero.train.tiny import build_model, build_tokenizer  # noqa: E402
from kernelzero.train.warm_start import sft_batch, sft_examples, warm_start  # noqa: E402
from kernelzero.types import Task  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    minis = make_tasks(2, seed=0, rows=2, cols=8, max_steps=1)
    tasks = [Task(name=m.name, source=m.source) for m in minis]
    solutions = {m.name: m.solution for m in minis}
    tok = build_tokenizer([m.source + m.solution for m in minis] * 4, vocab_size=320)
    examples = sft_examples(tasks, solutions, tok, "triton")
    model = build_model(ModelConfig(vocab_size=320, hidden_size=16, intermediate_size=32, heads=2, kv_heads=1), tok)
    return tok, examples, model


def test_loss_covers_the_answer_and_its_end_token_only(setup):
    tok, examples, _ = setup
    ids, n_prompt = examples[0]
    batch = sft_batch(examples, tok.pad_token_id, "cpu")
    labels = batch["labels"][0].tolist()
    assert all(x == -100 for x in labels[:n_prompt])
    assert labels[n_prompt : len(ids)] == ids[n_prompt:]
    assert ids[-1] == tok.eos_token_id
    assert tok.decode(ids[n_prompt:]).startswith("```python\nimport torch")


def test_examples_tokenized_in_chunks_are_those_tokenized_one_at_a_time():
    """The batched encoding (`encode_examples`, chunks smaller than the list here) gives each example the ids and
    prompt length that tokenizing its prompt and its answer alone gives."""
    from kernelzero.coder.prompts import build_messages
    from kernelzero.train.warm_start import encode_examples

    minis = make_tasks(5, seed=1, rows=2, cols=8, max_steps=2)
    tok = build_tokenizer([m.source + m.solution for m in minis] * 4, vocab_size=320)
    pairs = [(build_messages(Task(name=m.name, source=m.source), "triton"), m.solution) for m in minis]
    alone = []
    for messages, source in pairs:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt = tok(text, add_special_tokens=False)["input_ids"]
        tail = tok(f"```python\n{source}```{tok.eos_token}", add_special_tokens=False)["input_ids"]
        alone.append((list(prompt) + list(tail), len(prompt)))
    assert encode_examples(tok, pairs, chunk=2) == alone
    assert len({n for _, n in alone}) > 1  # the prompts differ in length: a misaligned chunk would show


def test_missing_solution_is_an_error(setup):
    tok, _, _ = setup
    with pytest.raises(ValueError, match="no solution for task x"):
        sft_examples([Task(name="x", source="")], {}, tok, "triton")


def test_stops_at_the_first_probe_past_the_band_floor(setup):
    tok, examples, model = setup
    seen = []

    def probe(m):
        seen.append(1)
        return 0.1 if len(seen) == 1 else 0.7

    cfg = WarmStartConfig(steps=50, batch_size=2, lr=1e-3, eval_every=2, stop_band=(0.2, 0.6))
    history = warm_start(model, tok, examples, cfg, probe=probe)
    assert len(history) == 4 and len(seen) == 2
    assert history[-1]["probe_pass1"] == 0.7 and history[-1]["probe_in_band"] is False
    assert history[1]["probe_in_band"] is False and "probe_pass1" not in history[0]


def test_stops_on_loss_and_on_time(setup):
    tok, examples, model = setup
    assert len(warm_start(model, tok, examples, WarmStartConfig(steps=20, batch_size=1, stop_loss=100.0))) == 1
    assert len(warm_start(model, tok, examples, WarmStartConfig(steps=20, batch_size=1, max_minutes=0.0))) == 1
    with pytest.raises(ValueError, match="at least one example"):
        warm_start(model, tok, [], WarmStartConfig(steps=1))


def test_adam_epsilon_sets_how_far_small_gradients_move_the_weights(setup):
    """At AdamW's default eps the first step moves every weight by about lr whatever its gradient (bias-corrected,
    m / sqrt(v) = sign(g)); an eps far above the gradients moves them by lr * g / eps, almost nothing."""
    import copy

    tok, examples, model = setup

    def moved(eps: float) -> float:
        m = copy.deepcopy(model)
        before = [p.detach().clone() for p in m.parameters()]
        cfg = WarmStartConfig(steps=1, batch_size=2, lr=1e-3, lr_schedule="constant", adam_epsilon=eps)
        warm_start(m, tok, examples, cfg)
        return max(float((p.detach() - b).abs().max()) for p, b in zip(m.parameters(), before))

    assert moved(1e-8) == pytest.approx(1e-3, rel=0.05)
    assert moved(1e3) < 1e-6

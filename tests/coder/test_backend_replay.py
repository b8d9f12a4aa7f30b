"""The `replay:` backend and `load_backend`'s spec parsing.

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/coder/test_backend_replay.py -q`
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelzero.coder.backends import BACKENDS, GenRequest, SamplingParams, load_backend


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def req(key: str, *idxs: int) -> GenRequest:
    return GenRequest(key, [{"role": "user", "content": "ignored"}], sample_idxs=tuple(idxs))


def test_completions_come_back_in_sample_idx_order(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"task": "a", "completion": "a2", "sample_idx": 2, "output_tokens": 12},
            {"task": "b", "completion": "b0"},
            {"task": "a", "completion": "a0", "sample_idx": 0, "output_tokens": 10, "finish_reason": "stop"},
            {"task": "a", "completion": "a1", "sample_idx": 1, "output_tokens": 11, "extra_field": "ignored"},
            {"task": "b", "completion": "b1"},
        ],
    )
    backend = load_backend(f"replay:{path}")
    done = []
    results = backend.generate([req("a"), req("b")], SamplingParams(n=2), on_done=lambda r, g: done.append(r.key))
    assert [g.text for g in results["a"]] == ["a0", "a1"]
    assert [g.output_tokens for g in results["a"]] == [10, 11]
    assert results["a"][0].finish_reason == "stop"
    assert [g.text for g in results["b"]] == ["b0", "b1"]  # no sample_idx: file order
    assert [g.sample_idx for g in results["b"]] == [0, 1]
    assert done == ["a", "b"]
    assert backend.warnings == [] and backend.missing == {}
    assert backend.spec == f"replay:{path}"


def test_missing_samples_are_reported_not_invented(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            {"task": "a", "completion": "a0", "sample_idx": 0},
            {"task": "a", "completion": "a5", "sample_idx": 5},  # gaps close up: this is the 2nd completion
        ],
    )
    backend = load_backend(f"replay:{path}")
    results = backend.generate([req("a"), req("nowhere")], SamplingParams(n=4))
    assert [(g.sample_idx, g.text) for g in results["a"]] == [(0, "a0"), (1, "a5")]
    assert results["nowhere"] == []
    assert backend.missing == {"a": [2, 3], "nowhere": [0, 1, 2, 3]}
    assert backend.warnings == [
        f"a: 2 completions stored in {path}, missing sample_idx 2-3",
        f"nowhere: 0 completions stored in {path}, missing sample_idx 0-3",
    ]


def test_explicit_sample_idxs_pick_from_the_ranking(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{"task": "a", "completion": f"a{i}"} for i in range(4)])
    backend = load_backend(f"replay:{path}")
    results = backend.generate([req("a", 3, 1, 7)], SamplingParams(n=1))
    assert [(g.sample_idx, g.text) for g in results["a"]] == [(3, "a3"), (1, "a1")]
    assert backend.missing == {"a": [7]}


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "not JSON"),
        ('{"task": "a"}', "need"),
        ('{"task": "a", "completion": "x", "sample_idx": -1}', "sample_idx must be"),
    ],
)
def test_bad_lines_fail_with_the_line_number(tmp_path, line, message):
    path = tmp_path / "s.jsonl"
    path.write_text('{"task": "a", "completion": "x"}\n\n' + line + "\n")
    with pytest.raises(ValueError, match=f"s.jsonl:3: {message}"):
        load_backend(f"replay:{path}")


def test_duplicate_sample_idx_is_an_error(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [{"task": "a", "completion": "x", "sample_idx": 0}, {"task": "a", "completion": "y", "sample_idx": 0}],
    )
    with pytest.raises(ValueError, match="sample_idx 0 appears twice"):
        load_backend(f"replay:{path}")


def test_duplicate_request_keys_are_refused(tmp_path):
    backend = load_backend(f"replay:{write_jsonl(tmp_path / 's.jsonl', [])}")
    with pytest.raises(ValueError, match="duplicate request key 'a'"):
        backend.generate([req("a"), req("a")], SamplingParams())


def test_unknown_prefix_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        load_backend("anthropic:claude")
    for name in BACKENDS:
        assert f"{name}:" in str(err.value)
    assert set(BACKENDS) == {"openai", "hf", "vllm", "replay"}


def test_spec_without_a_model_is_refused():
    with pytest.raises(ValueError, match="names no model"):
        load_backend("openai:")


def test_model_names_keep_their_colons(tmp_path):
    backend = load_backend("openai:qwen2.5-coder:7b", base_url="http://127.0.0.1:9/v1")
    assert backend.model == "qwen2.5-coder:7b" and backend.spec == "openai:qwen2.5-coder:7b"


def test_vllm_missing_gives_a_clear_error():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install vllm"):
            load_backend("vllm:/nowhere")
    else:
        pytest.skip("vllm is installed")


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"temperature": -1}, {"top_p": 0}, {"max_tokens": 0}])
def test_sampling_params_are_validated(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_importing_the_coder_loads_no_heavy_library():
    # Backends import transformers / vllm only when built; `kernelzero eval` with an HTTP server needs neither.
    code = (
        "import sys, kernelzero.coder, kernelzero.coder.backends; "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )
    assert out.stdout.strip() == "[]"

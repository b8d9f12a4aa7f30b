"""The Coder prompts: messages, templates as package data, versions, and the worked examples.

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/coder/test_prompts.py -q`
The Triton and Helion examples are verified on CPU (about 10 s and 20 s on an idle machine, `slow`). The CUDA example's
compile check takes 30-60 s and runs with KZ_CUDA_FIXTURES=all (as the verifier's CUDA fixtures do);
`kernelzero verify src/kernelzero/coder/templates/example_model.py src/kernelzero/coder/templates/example_cuda.py
--backend cuda` does the same by hand (status `compiled`).
"""

from __future__ import annotations

import ast
import os
from importlib import resources
from pathlib import Path

import pytest

from kernelzero.coder import PROMPT_VERSIONS, build_messages, extract_code
from kernelzero.coder.prompts import load_template
from kernelzero.types import Task

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_TASK = ROOT / "src" / "kernelzero" / "coder" / "templates" / "example_model.py"  # a complete task
LEAKY = ROOT / "src" / "kernelzero" / "tasks" / "suites" / "kz_basic" / "level1" / "24_LeakyReLU.py"
BACKENDS = ["cuda", "triton", "helion"]


def task_of(path: Path) -> Task:
    return Task(name=path.stem, source=path.read_text(), suite="test")


@pytest.mark.parametrize("backend", BACKENDS)
def test_messages_hold_the_task_source_and_the_instructions(backend):
    task = task_of(LEAKY)
    system, user = build_messages(task, backend)
    assert system["role"] == "system" and user["role"] == "user"
    assert {"cuda": "CUDA", "triton": "Triton", "helion": "Helion"}[backend] in system["content"]
    text = user["content"]
    assert f"```python\n{task.source}```" in text  # verbatim, fenced
    for phrase in [
        "`ModelNew`",
        "ModelNew(*get_init_inputs())",
        "same arguments as `Model.__init__`",
        "same inputs as `Model.forward`",
        "same shapes and dtypes",
        "do not fall back to PyTorch",
        "one ```python code block",
    ]:
        assert phrase in text, phrase
    backend_words = {"cuda": ["load_inline", "__global__"], "triton": ["@triton.jit"], "helion": ["@helion.kernel"]}[
        backend
    ]
    assert all(w in text for w in backend_words)
    assert "{{" not in text  # every slot was filled
    assert text.index("Scales x, adds y") < text.index(task.source)  # the example comes first


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_answer_is_what_extraction_would_take(backend):
    # The prompt's own example answer sits in a python block, so the extractor's rules apply to it as well.
    user = build_messages(task_of(EXAMPLE_TASK), backend)[1]["content"]
    example = load_template(f"example_{backend}.py")
    assert f"```python\n{example}```" in user


def test_task_source_with_slot_markers_is_left_alone():
    source = LEAKY.read_text() + '\nNOTE = "{{example_new}} {{task_source}}"\n'
    user = build_messages(Task(name="t", source=source), "triton")[1]["content"]
    assert source in user


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid: cuda, helion, triton"):
        build_messages(task_of(LEAKY), "opencl")


def test_templates_are_package_data():
    names = {p.name for p in (resources.files("kernelzero.coder") / "templates").iterdir()}
    assert {
        "system_cuda.txt",
        "user_cuda.txt",
        "system_triton.txt",
        "user_triton.txt",
        "example_model.py",
        "example_cuda.py",
        "example_triton.py",
        "system_helion.txt",
        "user_helion.txt",
        "example_helion.py",
    } <= names


def test_prompt_versions():
    assert PROMPT_VERSIONS == {"cuda": "cuda-v1", "triton": "triton-v1", "helion": "helion-v1"}


def test_example_task_is_the_packaged_template():
    assert EXAMPLE_TASK.read_text() == load_template("example_model.py")


def _init_args(source: str, cls: str) -> list[str]:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    return [a.arg for a in init.args.args]


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_model_new_has_the_reference_signature(backend):
    example = load_template(f"example_{backend}.py")
    assert _init_args(example, "ModelNew") == _init_args(load_template("example_model.py"), "Model")
    assert extract_code(f"```python\n{example}```") == example


@pytest.mark.slow
def test_triton_example_passes_the_verifier_on_cpu():
    pytest.importorskip("triton")
    from kernelzero.tasks import load_suite
    from kernelzero.verify import options_for, verify

    (task,) = load_suite(EXAMPLE_TASK).tasks
    verdict = verify(task, load_template("example_triton.py"), "triton", options_for("default"))
    assert verdict.status == "correct", (verdict.message, verdict.error_log)


@pytest.mark.slow
def test_helion_example_passes_the_verifier_on_cpu():
    pytest.importorskip("helion")
    from kernelzero.tasks import load_suite
    from kernelzero.verify import options_for, verify

    (task,) = load_suite(EXAMPLE_TASK).tasks
    verdict = verify(task, load_template("example_helion.py"), "helion", options_for("default", compile_check=False))
    assert verdict.status == "correct", (verdict.message, verdict.error_log)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KZ_CUDA_FIXTURES") != "all", reason="30-60 s compile: KZ_CUDA_FIXTURES=all")
def test_cuda_example_compiles():
    from kernelzero.tasks import load_suite
    from kernelzero.verify import options_for, verify
    from kernelzero.verify.backends.cuda.source import find_nvcc

    if find_nvcc() is None:
        pytest.skip("no nvcc here")
    (task,) = load_suite(EXAMPLE_TASK).tasks
    verdict = verify(task, load_template("example_cuda.py"), "cuda", options_for("default"))
    assert verdict.status in ("compiled", "correct"), (verdict.message, verdict.error_log)

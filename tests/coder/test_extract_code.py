"""`extract_code`: what code a model completion offers.

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/coder/test_extract_code.py -q`
"""

from __future__ import annotations

import pytest

from kernelzero.extract import extract_code

CODE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
REFERENCE = "class Model(torch.nn.Module):\n    pass\n"


def fenced(body: str, label: str = "python") -> str:
    return f"```{label}\n{body}```"


def test_verifier_import_path_is_the_same_function():
    from kernelzero.extract import extract_code as from_verify_module
    from kernelzero.verify import extract_code as from_verify

    assert from_verify is extract_code and from_verify_module is extract_code


def test_single_block():
    assert extract_code(fenced(CODE)) == CODE


def test_prose_around_the_block_is_dropped():
    text = f"Here is the optimised module:\n\n{fenced(CODE)}\n\nThis fuses the ops into one kernel."
    assert extract_code(text) == CODE


def test_last_python_block_wins_over_an_earlier_reference():
    text = f"The reference is:\n{fenced(REFERENCE)}\nMy answer:\n{fenced(CODE)}\n"
    assert extract_code(text) == CODE


def test_python_block_wins_over_a_later_block_of_another_label():
    shell = fenced("nvcc -O3 x.cu\n", "bash")
    text = f"{fenced(CODE)}\nCompile with:\n{shell}"
    assert extract_code(text) == CODE


def test_unlabelled_block_is_taken_when_no_python_block():
    assert extract_code(f"answer:\n{fenced(CODE, '')}") == CODE


@pytest.mark.parametrize("label", ["py", "Python", "python3"])
def test_python_label_variants(label):
    assert extract_code(f"{fenced(CODE, label)}\n{fenced('x', 'text')}") == CODE


def test_fence_with_trailing_words_and_indentation():
    text = "  ```python title=model_new.py\n" + CODE + "  ```\n"
    assert extract_code(text) == CODE


def test_no_fence_means_the_whole_text_is_the_module():
    assert extract_code("\n\n" + CODE + "\n\n") == CODE


def test_empty_and_blank_completions_give_no_code():
    assert extract_code("") == ""
    assert extract_code("  \n\t\n") == ""


def test_think_section_is_dropped():
    text = f"<think>Maybe:\n{fenced(REFERENCE)}\nno, fuse instead.</think>\nFinal:\n{fenced(CODE)}"
    assert extract_code(text) == CODE


def test_think_section_with_draft_but_answer_without_fence():
    text = f"<think>draft:\n{fenced(REFERENCE)}\n</think>\n{CODE}"
    assert extract_code(text) == CODE


def test_closing_think_tag_only_drops_what_precedes_it():
    # Chat templates of reasoning models often open <think> in the prompt: the completion has only the close.
    text = f"Let me draft it:\n{fenced(REFERENCE)}\nDone.</think>\n\n{fenced(CODE)}"
    assert extract_code(text) == CODE
    assert extract_code(f"draft {fenced(REFERENCE)}</think>\nno code in the answer") == "no code in the answer\n"


def test_unclosed_think_keeps_code_that_follows_it():
    assert extract_code(f"<think>I will write it now.\n{fenced(CODE)}") == CODE


def test_thinking_cut_off_gives_no_code():
    assert extract_code("<think>first compute the tile sizes, then") == ""


def test_cut_off_block_is_returned_as_far_as_it_goes():
    cut = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def forw"
    assert extract_code(cut) == "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forw"


def test_cut_off_answer_after_a_complete_reference_block_is_preferred():
    text = f"Reference:\n{fenced(REFERENCE)}\nAnswer:\n```python\nimport triton\n@triton.jit\ndef k("
    assert extract_code(text) == "import triton\n@triton.jit\ndef k("


def test_cut_off_right_after_the_opening_fence():
    assert extract_code("Here it comes:\n```python") == ""
    assert extract_code("Here it comes:\n```python\n") == ""


def test_inline_backticks_are_not_fences():
    text = f"Use ``` fences, or `x`. Answer:\n{fenced(CODE)}\nThat ``` was inline."
    assert extract_code(text) == CODE

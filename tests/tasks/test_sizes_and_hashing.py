"""Size globals, overrides, scaling and the stability of task hashes."""

import ast

import pytest

from kernelzero.tasks import normalise_source, scaled_sizes, size_globals, task_hash
from kernelzero.tasks.sizes import SizeError, apply_sizes, parse_sizes
from kernelzero.types import Task

SOURCE = """
import torch
batch_size = 128
N = 2048 * 2
height = width = 64
dim = 1
kernel_size = 3
channels = 24
bias_shape = (N, 1)
scale = 0.5
"""


def test_size_globals_evaluates_integer_arithmetic_only():
    assert size_globals(SOURCE) == {
        "batch_size": 128,
        "N": 4096,
        "height": 64,
        "width": 64,
        "dim": 1,
        "kernel_size": 3,
        "channels": 24,
    }


def test_scale_leaves_small_globals_alone_and_keeps_multiples_of_8():
    sizes = scaled_sizes(SOURCE, 0.25)
    assert sizes == {"batch_size": 32, "N": 1024, "height": 16, "width": 16, "channels": 16, "bias_shape": (1024, 1)}
    assert "dim" not in sizes and "kernel_size" not in sizes


def test_scale_keeps_powers_of_two_and_equal_values_equal():
    sizes = scaled_sizes("channels = 256\ngroups = 32\nd, w = 4096, 4096\nshape = (4096,)\nodd = 4095\n", 0.1)
    assert sizes["channels"] == 32 and sizes["groups"] == 16 and sizes["channels"] % sizes["groups"] == 0
    assert sizes["d"] == sizes["w"] == sizes["shape"][0] == 512
    assert sizes["odd"] == 410


def test_scale_never_goes_below_16_and_rejects_bad_factors():
    assert scaled_sizes("n = 4096\n", 0.001) == {"n": 16}
    for bad in (0, -1, 1.5):
        with pytest.raises(SizeError):
            scaled_sizes(SOURCE, bad)


def test_tuple_unpacking_and_tuple_overrides_apply():
    tree = apply_sizes(ast.parse("a, b = 32, 64\nshape = (a, 3)\n"), {"b": 16, "shape": [8, 3]})
    env: dict = {}
    exec(compile(tree, "<t>", "exec"), env)
    assert (env["a"], env["b"], env["shape"]) == (32, 16, (8, 3))


def test_overrides_rewrite_assignments_so_dependents_follow():
    tree = apply_sizes(ast.parse(SOURCE), {"N": 8, "width": 5})
    env: dict = {}
    exec(compile(tree, "<t>", "exec"), env)
    assert env["N"] == 8 and env["bias_shape"] == (8, 1)
    assert env["width"] == 5 and env["height"] == 64  # chained assignment split, only one name changed


def test_parse_sizes():
    assert parse_sizes(["a=1", "b = 2"]) == {"a": 1, "b": 2}
    for bad in (["a"], ["a=x"], ["=3"]):
        with pytest.raises(SizeError):
            parse_sizes(bad)


def test_hash_ignores_comments_blank_lines_and_spacing():
    a = "x = 1\ny = (x +\n     2)\n"
    b = "# header\nx=1   # one\n\n\ny = (x + 2)\n"
    assert normalise_source(a) == normalise_source(b)
    assert task_hash(Task("t", a)) == task_hash(Task("t", b))


def test_hash_changes_with_code_sizes_and_tolerance():
    base = Task("t", "x = 1\n")
    assert task_hash(base) != task_hash(Task("t", "x = 2\n"))
    assert task_hash(base) != task_hash(Task("t", "x = 1\n", sizes={"x": 3}))
    assert task_hash(base) != task_hash(Task("t", "x = 1\n", atol=1e-3))
    assert task_hash(base) == task_hash(Task("other-name", "x = 1\n", suite="elsewhere"))


def test_hash_is_pinned():
    # A changed normalisation silently invalidates every cache and baseline: pin one value.
    assert task_hash(Task("t", "import torch\nx = 1\n")) == "13cfa05619fc8524"


def test_indentation_is_significant():
    a = "if x:\n    y = 1\nz = 2\n"
    b = "if x:\n    y = 1\n    z = 2\n"
    assert normalise_source(a) != normalise_source(b)

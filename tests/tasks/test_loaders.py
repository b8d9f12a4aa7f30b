"""Loaders: KernelBench folder layout, single files, JSONL and parquet datasets, selection, Level 4."""

import json
from pathlib import Path

import pytest

from kernelzero.tasks import TaskLoadError, load_suite, resize, select
from kernelzero.tasks.sizes import SizeError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kb"


def test_folder_layout_gives_levels_ids_and_names():
    suite = load_suite(FIXTURES)
    names = [t.name for t in suite.tasks]
    assert names == ["level1/1_Scaled_Add", "level1/2_Row_Sum", "level2/1_Linear_Tanh"]
    first = suite.tasks[0]
    assert (first.level, first.problem_id) == (1, 1)
    assert "class Model" in first.source


def test_folder_skips_level4_with_a_note():
    suite = load_suite(FIXTURES / "KernelBench")
    assert all(t.level != 4 for t in suite.tasks)
    assert any("Level 4" in note for note in suite.notes)


def test_single_level_folder_and_single_file():
    assert [t.name for t in load_suite(FIXTURES / "KernelBench" / "level2").tasks] == ["level2/1_Linear_Tanh"]
    one = load_suite(FIXTURES / "KernelBench" / "level1" / "2_Row_Sum.py").tasks
    assert len(one) == 1 and one[0].problem_id == 2


def test_level4_file_is_refused_with_a_clear_message():
    with pytest.raises(TaskLoadError, match="pretrained"):
        load_suite(FIXTURES / "KernelBench" / "level4" / "1_gpt2_bs1.py")


def test_asking_for_level4_is_refused():
    with pytest.raises(TaskLoadError, match="Level 4"):
        select(load_suite(FIXTURES).tasks, levels=[4])


def _rows():
    for path in sorted((FIXTURES / "KernelBench").glob("level*/*.py")):
        level = int(path.parent.name.removeprefix("level"))
        yield {"code": path.read_text(), "level": level, "name": path.stem, "problem_id": int(path.stem.split("_")[0])}


def test_jsonl_dataset_matches_folder(tmp_path):
    data = tmp_path / "kb.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    suite = load_suite(data)
    folder = load_suite(FIXTURES)
    assert [(t.name, t.source) for t in suite.tasks] == [(t.name, t.source) for t in folder.tasks]
    assert any("Level 4" in n for n in suite.notes)


def test_parquet_dataset(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "kb.parquet"
    pq.write_table(pa.Table.from_pylist(list(_rows())), path)
    assert len(load_suite(path).tasks) == 3


def test_bad_dataset_rows_are_reported(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"level": 1}\n')
    with pytest.raises(TaskLoadError, match="lacks column"):
        load_suite(bad)
    bad.write_text("not json\n")
    with pytest.raises(TaskLoadError, match="not JSON"):
        load_suite(bad)


def test_unknown_spec_lists_builtins(tmp_path):
    with pytest.raises(TaskLoadError, match="kz-basic"):
        load_suite("no-such-suite")
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(TaskLoadError, match="unknown suite file type"):
        load_suite(tmp_path / "x.txt")


def test_select_by_level_and_pattern():
    tasks = load_suite(FIXTURES).tasks
    assert [t.name for t in select(tasks, levels=[2])] == ["level2/1_Linear_Tanh"]
    assert [t.name for t in select(tasks, names=["*Row*"])] == ["level1/2_Row_Sum"]
    assert [t.name for t in select(tasks, levels=[1], names=["2"])] == ["level1/2_Row_Sum"]


def test_resize_rejects_unknown_size_names():
    task = load_suite(FIXTURES).tasks[0]
    with pytest.raises(SizeError, match="rows, cols, alpha"):
        resize(task, sizes={"batch": 4})

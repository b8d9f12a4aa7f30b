"""Load task suites: the built-in ones, KernelBench checkouts, single files and dataset files.

`load_suite(spec)` accepts:
- a built-in suite name (`kz-basic`), shipped in `tasks/suites/`;
- a KernelBench checkout or any folder laid out as `levelN/ID_Name.py` (the folder itself, its
  `KernelBench/` subfolder, or one `levelN` folder);
- a single `.py` file;
- a `.jsonl` or `.parquet` file with the public KernelBench dataset's columns (`code`, `level`,
  `name`, `problem_id`).

Task names are `level{N}/{file stem}` when the level is known (`level1/19_ReLU`), else the file stem.
KernelBench Level 4 loads pretrained models at run time; it is skipped (with a note) when a whole
folder is loaded and refused with a clear message when asked for by level.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from pathlib import Path

from kernelzero.tasks.module import needs_download, tie_prone_of
from kernelzero.tasks.sizes import check_overrides, scaled_sizes
from kernelzero.types import Task

SUITES_DIR = Path(__file__).parent / "suites"
BUILTIN = {"kz-basic": SUITES_DIR / "kz_basic"}
_LEVEL_DIR = re.compile(r"^level(\d+)$")
_ID_NAME = re.compile(r"^(\d+)_(.+)$")
DATASET_COLUMNS = ("code", "level", "name", "problem_id")


class TaskLoadError(ValueError):
    """A suite spec that cannot be loaded; the message says why and what would work."""


@dataclass
class Suite:
    """Tasks loaded from one spec, plus notes on what was skipped."""

    name: str
    tasks: list[Task]
    notes: list[str] = field(default_factory=list)


def _task_from_file(path: Path, suite: str, level: int | None) -> Task:
    match = _ID_NAME.match(path.stem)
    problem_id = int(match.group(1)) if match else None
    name = f"level{level}/{path.stem}" if level is not None else path.stem
    source = path.read_text()
    try:
        tie_prone = tie_prone_of(source)
    except ValueError as exc:
        raise TaskLoadError(f"{path}: {exc}") from None
    return Task(name=name, source=source, suite=suite, level=level, problem_id=problem_id, tie_prone=tie_prone)


def _sort_key(task: Task) -> tuple:
    return (task.level or 0, task.problem_id if task.problem_id is not None else 1 << 30, task.name)


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    if (root / "KernelBench").is_dir():
        root = root / "KernelBench"
    single = _LEVEL_DIR.match(root.name)
    if single:
        return [(int(single.group(1)), root)]
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _LEVEL_DIR.match(p.name))]
    return sorted(found)


def load_folder(root: Path, suite: str) -> Suite:
    """Tasks of a KernelBench-style folder (`levelN/ID_Name.py`), or of every `.py` in a flat folder."""
    levels = _level_dirs(root)
    notes: list[str] = []
    tasks: list[Task] = []
    if not levels:
        tasks = [_task_from_file(p, suite, None) for p in sorted(root.glob("*.py"))]
    for level, folder in levels:
        files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
        if level == 4:
            notes.append(f"skipped {len(files)} Level 4 problems: they download pretrained models at run time")
            continue
        tasks += [_task_from_file(p, suite, level) for p in files]
    if not tasks and not notes:
        raise TaskLoadError(f"{root}: no task files (expected levelN/ID_Name.py or *.py)")
    return Suite(suite, sorted(tasks, key=_sort_key), notes)


def load_dataset_file(path: Path) -> Suite:
    """Tasks from a JSONL or parquet file in the public KernelBench dataset's columns."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise TaskLoadError("reading parquet needs pyarrow: pip install pyarrow") from None
        rows = pq.read_table(path).to_pylist()
    else:
        rows = []
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise TaskLoadError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
    tasks, skipped = [], 0
    for i, row in enumerate(rows):
        missing = [c for c in ("code", "name") if c not in row]
        if missing:
            raise TaskLoadError(f"{path}: row {i} lacks column(s) {missing}; expected {list(DATASET_COLUMNS)}")
        level = int(row["level"]) if row.get("level") is not None else None
        if level == 4 or needs_download(row["code"]):
            skipped += 1
            continue
        stem = str(row["name"]).removesuffix(".py")
        name = f"level{level}/{stem}" if level is not None else stem
        pid = row.get("problem_id")
        try:
            tie_prone = tie_prone_of(row["code"])
        except ValueError as exc:
            raise TaskLoadError(f"{path}: row {i}: {exc}") from None
        tasks.append(
            Task(
                name=name,
                source=row["code"],
                suite=path.name,
                level=level,
                problem_id=int(pid) if pid is not None else None,
                tie_prone=tie_prone,
            )
        )
    notes = [f"skipped {skipped} problems that download pretrained models (Level 4)"] if skipped else []
    return Suite(path.name, sorted(tasks, key=_sort_key), notes)


def _load_builtin(name: str) -> Suite:
    root = BUILTIN[name]
    suite = load_folder(root, name)
    presets_file = root / "presets.json"
    presets = json.loads(presets_file.read_text()) if presets_file.exists() else {}
    suite.tasks = [replace(t, presets=presets.get(t.name, {})) for t in suite.tasks]
    return suite


def load_suite(spec: str | Path) -> Suite:
    """Load a suite from a built-in name, folder, `.py`, `.jsonl` or `.parquet` path."""
    if str(spec) in BUILTIN:
        return _load_builtin(str(spec))
    path = Path(spec)
    if not path.exists():
        raise TaskLoadError(f"{spec}: no such file or folder, and not a built-in suite ({', '.join(BUILTIN)})")
    if path.is_dir():
        return load_folder(path, path.name)
    if path.suffix == ".py":
        task = _task_from_file(path, path.parent.name, None)
        if needs_download(task.source):
            raise TaskLoadError(f"{path}: loads a pretrained model at run time (KernelBench Level 4); not supported")
        return Suite(path.name, [task])
    if path.suffix in (".jsonl", ".json", ".parquet"):
        return load_dataset_file(path)
    raise TaskLoadError(f"{path}: unknown suite file type {path.suffix!r} (use a folder, .py, .jsonl or .parquet)")


def select(tasks: list[Task], levels: list[int] | None = None, names: list[str] | None = None) -> list[Task]:
    """Tasks at the given levels whose name (or problem id) matches one of the glob patterns."""
    if levels and 4 in levels:
        raise TaskLoadError("KernelBench Level 4 needs pretrained model downloads; kernelzero does not support it")
    out = [t for t in tasks if not levels or t.level in levels]
    if names:
        out = [
            t
            for t in out
            if any(fnmatch(t.name, p) or fnmatch(t.name, f"*/{p}") or str(t.problem_id) == p for p in names)
        ]
    return out


def resize(
    task: Task, sizes: dict[str, int] | None = None, scale: float | None = None, preset: str | None = None
) -> Task:
    """The task with size overrides applied: a named preset, then a scale factor, then explicit sizes.

    Explicit sizes naming no global of this task raise SizeError; a preset the task lacks is ignored
    (scaling applies instead, when given).
    """
    new: dict[str, int] = dict(task.sizes)
    if preset:
        new.update(task.presets.get(preset, {}))
    if scale is not None and scale != 1:
        new.update({k: v for k, v in scaled_sizes(task.source, scale).items() if k not in new})
    if sizes:
        check_overrides(task.source, sizes)
        new.update(sizes)
    return replace(task, sizes=new)

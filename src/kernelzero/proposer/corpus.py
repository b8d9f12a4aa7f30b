"""Mine a corpus of model code into an API catalog: `kernelzero proposer catalog CORPUS... --out catalog.json`.

    from kernelzero.proposer.corpus import build_catalog
    catalog = build_catalog(["default"])           # torch.nn + transformers + kz-basic, as installed here

A corpus spec is one of:
- `torch.nn`: the installed torch's `nn/modules/*.py` (each layer's forward in terms of `F.*`);
- `transformers`: the installed transformers' `models/*/modeling_*.py` (real model code);
- `default`: the two above plus kz-basic: real model code, no benchmark;
- a built-in suite name (`kz-basic`), a suite file (`.jsonl`, `.parquet`) or a KernelBench-style folder: its
  tasks' sources (tasks.load_suite);
- any other folder (every `*.py` below it) or a single `.py` file: a user's model code.

Mining KernelBench would make the Proposer's tasks resemble the test set, so a corpus that looks like
KernelBench (a path naming it, a `levelN/` layout, or a suite whose tasks carry KernelBench levels) is refused
unless `allow_kernelbench=True` (`--kernelbench-corpus`), and the catalog's `corpus.kernelbench_mined` records
it; every pool entry, proposal and admitted module carries that record on.

The catalog also lists the installed torch's public operators (`torch`, `torch.nn.functional`, `torch.special`,
`torch.linalg`) that the corpus never uses, with count 0, so sampling can reach them. Per-file results are
cached in `~/.cache/kernelzero/proposer/` (keyed by path, size, mtime and the extractor's version).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from kernelzero.proposer.catalog import ApiTable, ModuleUse, api_table, extract_modules, summarise_uses

CATALOG_VERSION = 1
EXTRACTOR_VERSION = "1"  # bump when catalog.py's extraction changes: cached per-file results are dropped
DEFAULT_CORPUS = ("torch.nn", "transformers", "kz-basic")
CACHE_DIR = Path.home() / ".cache" / "kernelzero" / "proposer"


class CorpusError(ValueError):
    """A corpus spec that cannot be mined; the message says why and what would work."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(f"corpus {name!r}: the package is not installed here")
    return Path(list(spec.submodule_search_locations)[0])


def _installed_files(spec: str) -> list[Path]:
    if spec == "torch.nn":
        return sorted((_package_dir("torch") / "nn" / "modules").glob("*.py"))
    files = sorted((_package_dir("transformers") / "models").glob("*/modeling_*.py"))
    return [f for f in files if not f.name.startswith(("modeling_tf_", "modeling_flax_"))]


def looks_like_kernelbench(spec: str) -> bool:
    """A spec naming KernelBench, or a folder with KernelBench's `levelN/` layout."""
    path = Path(spec)
    if "kernelbench" in path.name.lower() or "kernelbench" in str(path.resolve()).lower().split(os.sep)[-3:]:
        return True
    return path.is_dir() and (
        path.name.startswith("level") or any(path.glob("level[0-9]")) or any(path.glob("*/level[0-9]"))
    )


def _suite_sources(spec: str, levels: tuple[int, ...]) -> tuple[list[tuple[str, str]], bool]:
    """(where, source) of a suite's tasks, and whether they carry KernelBench levels (a benchmark)."""
    from kernelzero.tasks import load_suite

    tasks = load_suite(spec).tasks
    if levels:
        tasks = [t for t in tasks if t.level in levels]
    benchmark = spec != "kz-basic" and any(t.level is not None for t in tasks)
    return [(f"{spec}:{t.name}", t.source) for t in tasks], benchmark


class _FileCache:
    """Per-file extraction results of one corpus root, in one JSON file."""

    def __init__(self, root: str, cache_dir: Path | None):
        key = hashlib.sha256(f"{root}|{EXTRACTOR_VERSION}|{_table_hash()}".encode()).hexdigest()[:16]
        self.path = (cache_dir or CACHE_DIR) / f"catalog-{key}.json"
        try:
            self.entries: dict[str, Any] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.dirty = False

    def get(self, path: Path) -> list[ModuleUse] | None:
        st = path.stat()
        hit = self.entries.get(str(path))
        if hit and hit["size"] == st.st_size and hit["mtime_ns"] == st.st_mtime_ns:
            return [ModuleUse(u["name"], u["where"], u["apis"]) for u in hit["uses"]]
        return None

    def put(self, path: Path, uses: list[ModuleUse]) -> None:
        st = path.stat()
        rows = [{"name": u.name, "where": u.where, "apis": u.apis} for u in uses]
        self.entries[str(path)] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "uses": rows}
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.entries))
            tmp.replace(self.path)
        except OSError:
            pass  # a cache that cannot be written costs time, not correctness


def _table_hash() -> str:
    table = api_table()
    blob = json.dumps([sorted(table.category.items()), sorted(table.modules.items())])
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def _mine_files(root: str, files: list[Path], table: ApiTable, cache_dir: Path | None, notes: list[str]) -> list:
    cache = _FileCache(root, cache_dir)
    uses: list[ModuleUse] = []
    unreadable = 0
    for path in files:
        hit = cache.get(path)
        if hit is None:
            try:
                hit = extract_modules(path.read_text(encoding="utf-8", errors="replace"), str(path), table)
            except (SyntaxError, ValueError, RecursionError):
                hit, unreadable = [], unreadable + 1
            cache.put(path, hit)
        uses += hit
    cache.save()
    if unreadable:
        notes.append(f"{root}: {unreadable} file(s) did not parse and were skipped")
    return uses


def mine(
    spec: str, allow_kernelbench: bool = False, levels: tuple[int, ...] = (), cache_dir: Path | None = None
) -> tuple[list[ModuleUse], dict[str, Any]]:
    """The module uses of one corpus spec, and its record {"spec", "kind", "files", "kernelbench"}."""
    table = api_table()
    notes: list[str] = []
    if spec in ("torch.nn", "transformers"):
        files = _installed_files(spec)
        return _mine_files(spec, files, table, cache_dir, notes), {
            "spec": spec,
            "kind": "installed",
            "files": len(files),
            "kernelbench": False,
        }
    path = Path(spec)
    kernelbench = looks_like_kernelbench(spec)
    is_plain_folder = path.is_dir() and not kernelbench and not any(path.glob("*/level[0-9]"))
    if is_plain_folder or (path.suffix == ".py" and path.is_file()):
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        uses = _mine_files(str(path.resolve()), files, table, cache_dir, notes)
        record = {"spec": spec, "kind": "files", "files": len(files), "kernelbench": False}
    else:
        try:
            sources, benchmark = _suite_sources(spec, levels)
        except ValueError as exc:
            raise CorpusError(f"corpus {spec!r}: {exc}") from None
        kernelbench = kernelbench or benchmark
        uses = []
        for where, source in sources:
            try:
                uses += extract_modules(source, where, table)
            except SyntaxError:
                notes.append(f"{where}: does not parse, skipped")
        record = {
            "spec": spec,
            "kind": "suite",
            "files": len(sources),
            "kernelbench": kernelbench,
            "levels": list(levels),
        }
    if record["kernelbench"] and not allow_kernelbench:
        raise CorpusError(
            f"corpus {spec!r} looks like KernelBench: mining the benchmark makes training tasks "
            "resemble the test set; pass --kernelbench-corpus to mine it anyway (it is recorded)"
        )
    record["notes"] = notes
    return uses, record


def torch_operators() -> dict[str, str]:
    """Public operators of the installed torch: canonical name -> the namespace it was found in."""
    import torch
    import torch.nn.functional as F

    found: dict[str, str] = {}
    for label, namespace in (
        ("torch.nn.functional", F),
        ("torch.special", torch.special),
        ("torch.linalg", torch.linalg),
        ("torch", torch),
    ):
        for name in dir(namespace):
            if name.startswith("_") or name[0].isupper():
                continue
            obj = getattr(namespace, name, None)
            if callable(obj) and not isinstance(obj, type):
                found.setdefault(name, label)
    return found


def build_catalog(
    specs: list[str] | tuple[str, ...] = ("default",),
    allow_kernelbench: bool = False,
    levels: tuple[int, ...] = (),
    with_torch: bool = True,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """The catalog of a corpus: per-API category, count and forms, each module's API set, and provenance."""
    expanded = [s for spec in specs for s in (DEFAULT_CORPUS if spec == "default" else (spec,))]
    if not expanded:
        raise CorpusError("no corpus given")
    table = api_table()
    uses: list[ModuleUse] = []
    records = []
    for spec in dict.fromkeys(expanded):
        got, record = mine(spec, allow_kernelbench, levels, cache_dir)
        uses += got
        records.append(record)
    apis = summarise_uses(uses, table)
    for api in apis.values():
        api["in_torch"] = False
    if with_torch:
        for name, namespace in torch_operators().items():
            entry = apis.setdefault(name, {"category": table.category_of(name), "count": 0, "forms": {}})
            entry["in_torch"] = True
            entry.setdefault("namespace", namespace)
    for name, entry in apis.items():
        entry["sampled"] = table.sampled(name)
    modules = []
    for use in uses:
        sampled = sorted(a for a in use.apis if table.sampled(a))
        if sampled:
            modules.append({"where": f"{use.where}:{use.name}", "apis": sampled})
    corpus = {
        "specs": list(dict.fromkeys(expanded)),
        "kernelbench_mined": any(r["kernelbench"] for r in records),
        "sources": records,
    }
    return {"version": CATALOG_VERSION, "corpus": corpus, "apis": dict(sorted(apis.items())), "modules": modules}


def load_catalog(path: str | Path) -> dict[str, Any]:
    """A catalog written by `kernelzero proposer catalog`; a clear error for anything else."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path}: not a readable catalog ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != CATALOG_VERSION or "apis" not in data:
        raise CorpusError(f"{path}: not a catalog of version {CATALOG_VERSION} (write one with `proposer catalog`)")
    return data

"""Admission: which proposed modules become training tasks. `kernelzero proposer admit proposals.jsonl`.

    from kernelzero.proposer.admit import AdmitOptions, admit
    summary = admit(proposals, AdmitOptions(jobs=2), suite_path="suite.jsonl", log_path="admissions.jsonl")

Three stages and deduplication, in this order; the first failure names the proposal's reason:
- **syntax** (this process, syntax tree only): code present and parseable, the task contract, only
  harmless imports, every sampled API used in `Model.forward`, at most `max_extra` APIs beyond them;
- **dedup**: not a copy or near-duplicate (dedup.py) of a benchmark task or of an earlier proposal;
- **runnable** and **numerical**: the module runs only in the verifier's sandboxed reference process, which
  returns raw values (children.py, `jobs` proposals side by side); the checks run in this process on those
  values (checks.py): the module runs within time and memory limits, twice alike, inside the eager-time
  window; its outputs are finite, informative and precision-stable, and not ranks or indices.

| reason | stage | meaning |
|---|---|---|
| no_code | syntax | the completion holds no code |
| syntax_error | syntax | the code does not parse |
| missing_contract | syntax | no `class Model` with a `forward`, or no top-level `get_inputs` / `get_init_inputs` |
| forbidden_code | syntax | imports beyond torch/math/typing and the like, file or process access, exec/eval, or model downloads |
| missing_api | syntax | `Model.forward` does not use every API of the sampled set |
| extra_apis | syntax | `Model.forward` uses more than `max_extra` (default 2) non-glue APIs beyond the set |
| benchmark_duplicate | dedup | an exact copy or near-duplicate of a benchmark task (KernelBench Levels 1-3 by default) |
| duplicate | dedup | an exact copy or near-duplicate of an admitted module or an earlier proposal of this run |
| run_failed | runnable | loading, `get_init_inputs`, `Model(...)`, `get_inputs` or the forward (float32 or float64) raised |
| bad_output | runnable | the forward returned something other than a tensor or a tuple of tensors |
| timeout | runnable | no result within `timeout_s` |
| oom | runnable | out of device memory, or resident memory past `mem_gb` |
| crash | runnable | the module's process died without a result (a signal, `os._exit`) |
| nondeterministic | runnable | two runs on the same inputs disagree beyond the Coder's tolerance |
| too_fast | runnable | eager forward under the window's lower end (default 50 us; GPU only unless asked; timed: children.py) |
| too_slow | runnable | eager forward over the window's upper end (default 20 ms; GPU only unless asked) |
| nonfinite | numerical | an output holds NaN or Inf |
| tie_prone | numerical | an integer/bool output of a module that uses a ranking op (top-k/argmax indices, sort orders) |
| degenerate | numerical | a trivial answer passes (zeros, a constant, the same answer for other inputs, an input) |
| precision_sensitive | numerical | float32 and float64 outputs differ beyond a tenth of the Coder's tolerance on one of 3 draws |

Deduplication compares each proposal with the admitted suite and with every earlier proposal of the run
that passed the syntax stage (whatever became of it later), so a repeat is rejected whether or not the
first one ran. Decisions are appended to a JSONL log, one per proposal id, and admitted modules to the suite
file, so an interrupted admission resumes where it stopped.
"""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelzero.proposer.catalog import api_table, forward_apis
from kernelzero.proposer.children import run_proposals, sandbox_plan
from kernelzero.proposer.dedup import BenchmarkIndex, default_benchmark, exact_key, near_key
from kernelzero.proposer.records import AppendLog, jsonl_rows
from kernelzero.tasks.module import needs_download
from kernelzero.tasks.sizes import SizeError, scaled_sizes

STAGES = ("syntax", "dedup", "runnable", "numerical", "done")
REASONS = {
    "no_code": "syntax",
    "syntax_error": "syntax",
    "missing_contract": "syntax",
    "forbidden_code": "syntax",
    "missing_api": "syntax",
    "extra_apis": "syntax",
    "benchmark_duplicate": "dedup",
    "duplicate": "dedup",
    "run_failed": "runnable",
    "bad_output": "runnable",
    "timeout": "runnable",
    "oom": "runnable",
    "crash": "runnable",
    "nondeterministic": "runnable",
    "too_fast": "runnable",
    "too_slow": "runnable",
    "nonfinite": "numerical",
    "tie_prone": "numerical",
    "degenerate": "numerical",
    "precision_sensitive": "numerical",
}
ALLOWED_IMPORTS = frozenset(
    {
        "torch",
        "math",
        "typing",
        "functools",
        "itertools",
        "collections",
        "numbers",
        "dataclasses",
        "__future__",
        "operator",
    }
)
FORBIDDEN_CALLS = frozenset({"open", "exec", "eval", "compile", "__import__", "input", "breakpoint", "globals"})


@dataclass(frozen=True)
class AdmitOptions:
    """How proposals are admitted."""

    device: str = "auto"  # where the modules run: "auto" (cuda when available), "cuda", "cpu"
    jobs: int = 2  # proposals checked side by side
    timeout_s: float = 180.0  # per proposal, process start-up included
    mem_gb: float = 16.0  # a module's process past this resident memory is killed (oom)
    seed: int = 0  # seeds the model (seed) and the 3 input draws (seed + 1 .. seed + 3)
    scale: float | None = None  # shrink size globals (tasks.sizes.scaled_sizes) before running, e.g. 0.25 on CPU
    max_extra: int = 2  # non-glue APIs allowed beyond the sampled set
    window_us: tuple[float, float] = (50.0, 20000.0)  # eager forward time window
    window_on_cpu: bool = False  # apply the window on CPU too (off: CPU times say nothing about a GPU)
    profile: str = "default"  # the Coder's verifier profile, whose tolerance the checks use
    benchmarks: tuple[str, ...] = ()  # suites never to duplicate, besides the default one
    default_benchmark: bool = True  # also KernelBench Levels 1-3 from ../shared/data when present


@dataclass(frozen=True)
class Decision:
    """What admission decided about one proposal (a line of the admission log)."""

    id: str  # the proposal's id ("<api set key>#<sample_idx>")
    admitted: bool  # became a task of the suite
    stage: str  # the stage it failed in, or "done"
    reason: str = ""  # one of REASONS when rejected
    message: str = ""  # why, bounded
    apis: tuple[str, ...] = ()  # the sampled API set
    exact_key: str | None = None  # dedup.exact_key, when the code parsed
    near_key: str | None = None  # dedup.near_key, when the code has a Model.forward
    forward_ms: float | None = None  # eager forward time, measured by this process (children.py)
    seconds: float = 0.0  # the proposal's wall time in the runnable and numerical stages (0 when it never ran)
    task: str = ""  # the admitted task's name in the suite
    extra: tuple[str, ...] = field(default_factory=tuple)  # APIs used beyond the set


def tolerance(profile: str) -> float:
    """The Coder's float32 tolerance (atol) under a verifier profile, from kernelzero.verify."""
    from kernelzero.verify import options_for
    from kernelzero.verify.options import tolerances

    atol, _ = tolerances(options_for(profile=profile), None, None)
    return atol


def _contract(tree: ast.Module) -> str:
    top = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    model = top.get("Model")
    if not isinstance(model, ast.ClassDef):
        return "no top-level `class Model`"
    if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model.body):
        return "`Model` has no `forward` method"
    missing = [n for n in ("get_inputs", "get_init_inputs") if not isinstance(top.get(n), ast.FunctionDef)]
    return f"no top-level function(s) {', '.join(missing)}" if missing else ""


def _forbidden(tree: ast.Module, code: str) -> str:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or "."]
            for name in names:
                if getattr(node, "level", 0) or name.split(".")[0] not in ALLOWED_IMPORTS:
                    return f"imports {name!r} (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            return f"calls {node.func.id}()"
    return "loads a pretrained model at run time" if needs_download(code) else ""


def check_syntax(code: str, apis: tuple[str, ...], max_extra: int) -> tuple[str, str, tuple[str, ...]]:
    """(reason, message, extra APIs) of the syntax stage; reason "" when the code passes."""
    if not code.strip():
        return "no_code", "the completion holds no code", ()
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return "syntax_error", f"line {exc.lineno}: {exc.msg}", ()
    broken = _contract(tree)
    if broken:
        return "missing_contract", broken, ()
    bad = _forbidden(tree, code)
    if bad:
        return "forbidden_code", bad, ()
    table = api_table()
    used = {a for a in forward_apis(code, "Model", table) if table.sampled(a) or a in apis}
    missing = [a for a in apis if a not in used]
    if missing:
        return "missing_api", f"Model.forward does not use {', '.join(missing)}", ()
    extra = tuple(sorted(used - set(apis)))
    if len(extra) > max_extra:
        return "extra_apis", f"{len(extra)} APIs beyond the set ({', '.join(extra)}); at most {max_extra}", extra
    return "", "", extra


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def benchmark_index(options: AdmitOptions) -> tuple[BenchmarkIndex, list[str]]:
    """The index of benchmark tasks to keep out of the suite, and notes on what it holds."""
    index = BenchmarkIndex()
    notes = []
    specs = list(options.benchmarks)
    if options.default_benchmark:
        found = default_benchmark()
        if found is None:
            notes.append("no benchmark dedup by default: ../shared/data/kernelbench.jsonl is absent")
        elif str(found) not in specs:
            specs.insert(0, str(found))
    for spec in specs:
        index.add_suite(spec)
    return index, notes


def _job(code: str, apis: tuple[str, ...], options: AdmitOptions, device: str, tol: float) -> dict[str, Any]:
    sizes = {}
    if options.scale is not None and options.scale != 1:
        try:
            sizes = {k: v for k, v in scaled_sizes(code, options.scale).items() if isinstance(v, int)}
        except (SizeError, SyntaxError, ValueError):
            sizes = {}
    ranking = any(a in api_table().ranking for a in forward_apis(code))
    window = options.window_us if (device.startswith("cuda") or options.window_on_cpu) else None
    return {
        "source": code,
        "sizes": sizes,
        "device": device,
        "seed": options.seed,
        "tol": tol,
        "window_us": list(window) if window else None,
        "ranking": ranking,
        "mem_gb": options.mem_gb,
        "profile": options.profile,
    }


class _Seen:
    """Keys of modules already in the suite or proposed earlier in this run."""

    def __init__(self) -> None:
        self.exact: dict[str, str] = {}
        self.near: dict[str, str] = {}

    def match(self, exact: str | None, near: str | None) -> str | None:
        if exact and exact in self.exact:
            return f"an exact copy of {self.exact[exact]}"
        if near and near in self.near:
            return f"a near-duplicate of {self.near[near]} (same API sequence and inputs)"
        return None

    def add(self, exact: str | None, near: str | None, who: str) -> None:
        if exact:
            self.exact.setdefault(exact, who)
        if near:
            self.near.setdefault(near, who)


def _screen(proposal: dict[str, Any], options: AdmitOptions, bench: BenchmarkIndex, seen: _Seen) -> Decision | None:
    """The syntax and dedup stages: a rejection Decision, or None when the proposal goes on to run."""
    apis = tuple(proposal["apis"])
    code = proposal.get("code") or ""
    reason, message, extra = check_syntax(code, apis, options.max_extra)
    if reason:
        return Decision(proposal["id"], False, REASONS[reason], reason, message, apis, extra=extra)
    exact, near = exact_key(code), near_key(code)
    dup = bench.match(exact, near)
    reason = "benchmark_duplicate" if dup else ""
    if not dup:
        dup = seen.match(exact, near)
        reason = "duplicate" if dup else ""
    seen.add(exact, near, f"proposal {proposal['id']}")
    if dup:
        return Decision(proposal["id"], False, "dedup", reason, f"{dup}", apis, exact, near, extra=extra)
    return None


def _seen_before(suite: Any, log: AppendLog) -> _Seen:
    """Dedup keys of the suite's modules and of every proposal already decided (a resumed run)."""
    seen = _Seen()
    for exact, near, name in suite.keys():
        seen.add(exact, near, f"admitted task {name}")
    for record in log.records():
        seen.add(record.get("exact_key"), record.get("near_key"), f"proposal {record['id']}")
    return seen


def _decided(pid: str, apis: tuple, keys: tuple, result: dict[str, Any], name: str, extra: tuple) -> Decision:
    """The Decision for a proposal that ran in a reference process."""
    return Decision(
        pid,
        bool(result["ok"]),
        result.get("stage", "runnable"),
        result.get("reason", ""),
        result.get("message", ""),
        apis,
        keys[0],
        keys[1],
        result.get("forward_ms"),
        result.get("seconds", 0.0),
        name,
        extra,
    )


def admit(
    proposals: list[dict[str, Any]],
    options: AdmitOptions,
    suite_path: str | Path,
    log_path: str | Path,
    on_decision: Callable[[Decision], None] | None = None,
) -> dict[str, Any]:
    """Admit or reject every proposal not yet in the log; return a summary (counts per reason, throughput)."""
    from kernelzero.proposer.suite import SuiteWriter

    sandbox_plan()  # SandboxUnavailable before any proposal runs, where the sandbox cannot be set up
    device = _resolve_device(options.device)
    tol = tolerance(options.profile)
    bench, notes = benchmark_index(options)
    log = AppendLog(Path(log_path), key=lambda r: r["id"])
    suite = SuiteWriter(Path(suite_path), bench.sources)
    seen = _seen_before(suite, log)
    todo = [p for p in proposals if p["id"] not in log]
    by_id = {p["id"]: p for p in todo}
    extras: dict[str, tuple[str, ...]] = {}
    counts: Counter = Counter()

    def record(decision: Decision) -> None:
        log.append(asdict(decision))
        counts[decision.reason or "admitted"] += 1
        if on_decision:
            on_decision(decision)

    def jobs() -> Iterator[tuple[str, dict[str, Any]]]:
        for proposal in todo:
            rejected = _screen(proposal, options, bench, seen)
            if rejected:
                record(rejected)
                continue
            extras[proposal["id"]] = check_syntax(proposal["code"], tuple(proposal["apis"]), options.max_extra)[2]
            yield proposal["id"], _job(proposal["code"], tuple(proposal["apis"]), options, device, tol)

    start = time.monotonic()
    for pid, result in run_proposals(jobs(), options.jobs, options.timeout_s):
        proposal = by_id[pid]
        code = proposal["code"]
        apis = tuple(proposal["apis"])
        keys = (exact_key(code), near_key(code))
        name = suite.add(proposal, keys, result, device, options) if result["ok"] else ""
        record(_decided(pid, apis, keys, result, name, extras.pop(pid, ())))
    elapsed = time.monotonic() - start
    decided = sum(counts.values())
    rate = round(decided / elapsed * 3600, 1) if elapsed > 0 else None
    return {
        "decided": decided,
        "admitted": counts.get("admitted", 0),
        "reasons": dict(counts.most_common()),
        "seconds": round(elapsed, 1),
        "per_hour": rate,
        "device": device,
        "jobs": options.jobs,
        "notes": notes,
    }


def load_proposals(path: str | Path) -> list[dict[str, Any]]:
    """Proposal records (`proposer propose` output) from a JSONL file; a clear error for malformed lines."""
    out = []
    for lineno, row in jsonl_rows(path):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("apis"), list):
            raise ValueError(f'{path}:{lineno}: a proposal needs "id" (str) and "apis" (list)')
        if "code" not in row:
            from kernelzero.coder import extract_code

            row["code"] = extract_code(row.get("completion") or "")
        out.append(row)
    return out

"""Generate proposals for a pool of API sets: `kernelzero proposer propose --pool pool.jsonl --model SPEC`.

    cfg = ProposeConfig(pool="pool.jsonl", model="replay:src/kernelzero/data/proposer_replay.jsonl",
                        out="proposals.jsonl")
    summary = run_propose(cfg)

The model spec is any of the Coder's generation backends (`openai:MODEL`, `hf:PATH`, `vllm:PATH`,
`replay:FILE.jsonl`; coder/backends) or `template` / `template:SEED`, the no-model Proposer of generator.py.
Each pool entry (one API set) is one request keyed by its set key (`gelu+layer_norm+linear`), asking for
`samples` proposals; a replay file's lines name that key as their "task". Proposals are appended to the
output JSONL one record per (set key, sample index), with id `<set key>#<sample_idx>`, so an interrupted run
resumes with only what is missing (failed generations are not stored and are asked for again).

A proposal record: id, key, sample_idx, apis, origin and corpus (from the pool entry), model,
prompt_version, completion, code (coder.extract.extract_code of the completion), output_tokens,
prompt_tokens, finish_reason, seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelzero.coder import extract_code
from kernelzero.coder.backends import load_backend
from kernelzero.coder.backends.base import Generation, GenRequest, SamplingParams
from kernelzero.proposer.cooccur import set_key
from kernelzero.proposer.generator import completion_for
from kernelzero.proposer.prompts import PROMPT_VERSION, TEMPLATE_VERSION, build_messages
from kernelzero.proposer.records import AppendLog, jsonl_rows


@dataclass(frozen=True)
class ProposeConfig:
    """One proposal-generation run."""

    pool: str  # pool JSONL (`proposer pool` or `proposer frontier` output)
    model: str  # openai:MODEL, hf:PATH, vllm:PATH, replay:FILE.jsonl, template[:SEED]
    out: str  # proposals JSONL, appended to and resumed
    samples: int = 1  # proposals per API set
    limit: int | None = None  # only the first N pool entries
    temperature: float = 1.0  # sampling temperature
    top_p: float = 1.0  # nucleus mass
    max_tokens: int = 4096  # completion tokens per proposal
    seed: int | None = None  # base sampling seed (template: the generator's seed, default 0)
    concurrency: int = 8  # requests in flight (openai backend)


def load_pool(path: str | Path) -> list[dict[str, Any]]:
    """Pool entries {"key", "apis", ...} from a JSONL file; malformed lines raise ValueError."""
    entries = []
    for lineno, row in jsonl_rows(path):
        apis = row.get("apis") if isinstance(row, dict) else None
        if not isinstance(apis, list) or not apis or not all(isinstance(a, str) for a in apis):
            raise ValueError(f'{path}:{lineno}: a pool entry needs "apis", a list of API names')
        row["key"] = row.get("key") or set_key(apis)
        entries.append(row)
    return entries


class TemplateBackend:
    """The template generator behind the Backend interface: `template` or `template:SEED`."""

    def __init__(self, spec: str, apis_by_key: dict[str, list[str]]):
        _, _, seed = spec.partition(":")
        if seed and not seed.lstrip("-").isdigit():
            raise ValueError(f"model spec {spec!r}: write template or template:SEED (an integer)")
        self.spec, self.seed, self.apis = spec, int(seed or 0), apis_by_key
        self.warnings: list[str] = []

    def generate(self, requests, params: SamplingParams, on_done=None) -> dict[str, list[Generation]]:
        out = {}
        for req in requests:
            seed = self.seed + (params.seed or 0)
            gens = [
                Generation(text=completion_for(self.apis[req.key], seed + i), finish_reason="stop", sample_idx=i)
                for i in req.indices(params)
            ]
            out[req.key] = gens
            if on_done is not None:
                on_done(req, gens)
        return out


def _backend(cfg: ProposeConfig, apis_by_key: dict[str, list[str]]):
    if cfg.model == "template" or cfg.model.startswith("template:"):
        return TemplateBackend(cfg.model, apis_by_key), TEMPLATE_VERSION
    options = {"concurrency": cfg.concurrency} if cfg.model.startswith("openai:") else {}
    return load_backend(cfg.model, **options), PROMPT_VERSION


def _record(model: str, version: str, key: str, entry: dict[str, Any], g: Generation) -> dict[str, Any]:
    """One line of the proposals file."""
    return {
        "id": f"{key}#{g.sample_idx}",
        "key": key,
        "sample_idx": g.sample_idx,
        "apis": list(entry["apis"]),
        "origin": entry.get("origin", ""),
        "corpus": entry.get("corpus") or {},
        "model": model,
        "prompt_version": version,
        "completion": g.text,
        "code": extract_code(g.text),
        "output_tokens": g.output_tokens,
        "prompt_tokens": g.prompt_tokens,
        "finish_reason": g.finish_reason,
        "seconds": g.seconds,
    }


def _replay_covered(cfg: ProposeConfig, stored: dict, by_key: dict, notes: list[str]) -> dict:
    """The pool entries a replay file has proposals for (like `eval` with a replay: only those are asked)."""
    covered = [k for k in by_key if k in stored]
    if not covered:
        raise ValueError(f"{cfg.model} holds no proposal for any API set of {cfg.pool}")
    if len(covered) < len(by_key):
        notes.append(f"the replay file covers {len(covered)} of the {len(by_key)} API sets; proposing those")
    return {k: by_key[k] for k in covered}


def run_propose(cfg: ProposeConfig, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Generate the proposals `cfg.out` lacks; return {"written", "failed", "skipped", "warnings", "total"}."""
    if cfg.samples < 1:
        raise ValueError(f"samples must be >= 1, got {cfg.samples}")
    entries = load_pool(cfg.pool)[: cfg.limit] if cfg.limit else load_pool(cfg.pool)
    by_key = {e["key"]: e for e in entries}
    backend, version = _backend(cfg, {k: e["apis"] for k, e in by_key.items()})
    notes: list[str] = []
    if cfg.model.startswith("replay:"):
        by_key = _replay_covered(cfg, backend.completions, by_key, notes)
    log = AppendLog(Path(cfg.out), key=lambda r: r["id"])
    requests = []
    for key, entry in by_key.items():
        missing = tuple(i for i in range(cfg.samples) if f"{key}#{i}" not in log)
        if missing:
            requests.append(GenRequest(key, build_messages(entry["apis"], entry.get("failure_notes") or ()), missing))
    failed: list[str] = []
    written = 0

    def on_done(request: GenRequest, gens: list[Generation]) -> None:
        nonlocal written
        entry = by_key[request.key]
        for g in gens:
            if not g.ok:
                failed.append(f"{request.key} sample {g.sample_idx}: {g.error}")
                continue
            written += log.append(_record(cfg.model, version, request.key, entry, g))
        if progress:
            progress(len(gens))

    if requests:
        params = SamplingParams(
            n=cfg.samples, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed
        )
        backend.generate(requests, params, on_done=on_done)
    warnings = notes + list(getattr(backend, "warnings", [])) + failed[:20]
    return {
        "written": written,
        "failed": len(failed),
        "skipped": len(by_key) * cfg.samples - sum(len(r.sample_idxs) for r in requests),
        "total": len(log),
        "warnings": warnings,
    }

"""The miniature's state, carried between device calls that do not share a machine.

A device call's machine may be gone by the next call (2026-12-06: twice in two sessions, once with the reply
saying it was still held). The miniature then lost the warm start and every GRPO step. With `--carry-out`, each
call of `bench/train_gpu.py miniature` ends by writing its state into $OUT; here it is kept in `.gpu/mstate`
(`keep`), and the next call, carrying that folder, restores it with `--carry-in .gpu/mstate` when its machine is
fresh (a machine that kept its state uses its own, which is exact).

What travels (a device call returns at most 8 files of 16 MiB, 64 MiB together, and carries 64 MiB in):
- `policy.bf16.safetensors.part<i>`: the latest policy's weights (the last GRPO checkpoint, else the warm start) in
  bfloat16, one safetensors blob cut into byte parts under 16 MiB (3 for the 23M-parameter miniature), each
  with its sha256 in the manifest. The pass@1 points already sample in bfloat16 on the GPU; training restarts
  from the float32 upcast of the rounded weights.
- `state.tar.gz`: every other file of the run folder that is not weights or optimizer state (tasks, curve,
  steps, the points' samples, probe times, run.json, the verdict cache, the policies' configs and tokenizer, the
  last checkpoint's trainer_state.json), the manifest `carry.json`, and under `report/` the call's other report
  files, so that what comes back stays within 8 files.

What does not travel, and what that changes: the optimizer's moments (Adam restarts after a restore; the step
count, the data order's position and the constant learning rate carry on), and the RNG state. A restored run
has the warm start's configuration but not its weights; the miniature starts each call's GRPO, and so its KL
reference, from the policy the call begins with, on a kept machine as on a fresh one.

`fork` starts another run from a kept one's latest policy, here, without a device call: the same tasks, tokenizer,
reference timings and verdict cache, that policy as its warm start, and nothing of GRPO (no checkpoints, no curve).
Its run.json keeps every section but `grpo`, so the fork's first call freezes its own GRPO settings while tasks,
model, warm start and reward are still checked against the source's; `forked.json` says where it came from. A GRPO
setting is tried on a warm start without the 5 minutes a new one takes; its first point is measured afresh.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PART_BYTES = (16 << 20) - (64 << 10)  # under the device's 16 MiB a returned file
BLOB = "policy.bf16.safetensors"
TAR = "state.tar.gz"
MANIFEST = "carry.json"
HEAVY = (".safetensors", ".pt", ".bin", ".pth")  # weights and optimizer state: never in the tarball
MAX_FILE = 8 << 20  # a larger run file stays behind (said in the manifest)


def latest_policy(run: Path) -> tuple[Path, int]:
    """The folder a resumed run continues from and its step: the last GRPO checkpoint, else the warm start."""
    ckpts = [p for p in (run / "checkpoints").glob("checkpoint-*") if (p / "trainer_state.json").exists()]
    if ckpts:
        last = max(ckpts, key=lambda p: int(p.name.rsplit("-", 1)[1]))
        return last, int(last.name.rsplit("-", 1)[1])
    if (run / "warm_start" / "config.json").exists():
        return run / "warm_start", 0
    raise FileNotFoundError(f"{run}: no warm start and no checkpoint, nothing to carry")


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no .safetensors weights")
    state = {}
    for f in files:
        state.update(load_file(str(f)))
    return state


def write_parts(folder: Path, out: Path, part_bytes: int = PART_BYTES) -> tuple[dict, list[dict]]:
    """`folder`'s weights in bfloat16 as one safetensors blob cut into parts under `part_bytes` in `out`; returns the
    rounded state and the parts' records (name, bytes, sha256) for the manifest."""
    import torch
    from safetensors.torch import save

    state = {k: v.to(torch.bfloat16).contiguous() for k, v in _weights(folder).items()}
    blob = save(state, metadata={"format": "pt"})
    parts = []
    for i, at in enumerate(range(0, len(blob), part_bytes)):
        chunk = blob[at : at + part_bytes]
        (out / f"{BLOB}.part{i}").write_bytes(chunk)
        parts.append({"name": f"{BLOB}.part{i}", "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    return state, parts


def load_policy(blob: bytes, manifest: dict, folder: Path) -> Any:
    """The carried weights (`blob`: the parts joined and checked by `_blob`) as a float32 model of `folder`'s
    config.json (which came with the tarball); the caller saves it, then puts the carried configs back
    (save_pretrained rewrites them)."""
    import torch
    from safetensors.torch import load
    from transformers import AutoConfig, AutoModelForCausalLM

    state = load(blob)
    if len(state) != manifest["tensors"]:
        raise ValueError(f"{folder}: {len(state)} carried tensors, the manifest says {manifest['tensors']}")
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=torch.float32)
    missing, unexpected = model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()  # saved once
    if unexpected or set(missing) - tied:
        raise ValueError(f"the carried weights do not fit {folder}'s config ({missing[:3]}, {unexpected[:3]})")
    model.tie_weights()
    return model


def carried(name: str) -> bool:
    """Whether a file of an output folder is part of a carry (the tarball or a weights part), not a report file."""
    return name == TAR or name.startswith(f"{BLOB}.part")


def write_tar(path: Path, run: Path, files: list[Path], report: list[Path], manifest: dict) -> None:
    """The tarball: `files` (relative to `run`) under run/, `report` files under report/, and the manifest."""
    with tarfile.open(path, "w:gz") as tar:
        for rel in files:
            tar.add(run / rel, arcname=f"run/{rel}")
        for f in report:
            tar.add(f, arcname=f"report/{f.name}")
        data = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def pack(run: Path, out: Path, report: list[Path] = (), part_bytes: int = PART_BYTES) -> dict:
    """Write the run's state into `out` (the parts and the tarball); move `report` files into the tarball."""
    folder, step = latest_policy(run)
    state, parts = write_parts(folder, out, part_bytes)
    left, files = [], []
    for f in sorted(p for p in run.rglob("*") if p.is_file()):
        rel = f.relative_to(run)
        if rel.suffix in HEAVY or (rel.parts[0] == "checkpoints" and f.parent != folder):
            continue
        (left if f.stat().st_size > MAX_FILE else files).append(rel)
    manifest = {
        "step": step,
        "policy": str(folder.relative_to(run)),
        "parts": parts,
        "tensors": len(state),
        "dtype": "bfloat16",
        "left_behind": [str(r) for r in left],
    }
    write_tar(out / TAR, run, files, report, manifest)
    for f in report:
        f.unlink()
    mib = sum(p["bytes"] for p in parts) / 2**20
    print(f"[carry] out: step {step} ({manifest['policy']}), {mib:.1f} MiB in {len(parts)} parts, {len(files)} files")
    return manifest


def read_manifest(src: Path) -> dict:
    with tarfile.open(src / TAR) as tar:
        member = tar.extractfile(MANIFEST)
        if member is None:
            raise ValueError(f"{src / TAR}: no {MANIFEST}")
        return json.loads(member.read())


def _blob(src: Path, manifest: dict) -> bytes:
    chunks = []
    for p in manifest["parts"]:
        path = src / p["name"]
        if not path.exists():
            raise FileNotFoundError(f"{path}: a part of the carried policy is missing ({len(manifest['parts'])} parts)")
        chunk = path.read_bytes()
        if len(chunk) != p["bytes"] or hashlib.sha256(chunk).hexdigest() != p["sha256"]:
            raise ValueError(f"{path}: does not match the manifest (size or sha256): a part from another call?")
        chunks.append(chunk)
    return b"".join(chunks)


def restore(src: Path, run: Path) -> int:
    """Rebuild `run` from a carried state in `src`; return its step. The policy is written float32 into the folder
    it came from (for a checkpoint, also into run/policy with step.txt), loadable by from_pretrained and by the
    trainer's resume (no optimizer file: the optimizer starts afresh)."""
    if not (src / TAR).exists():
        raise FileNotFoundError(f"{src}: no {TAR} (keep a call's files with `miniature_carry.py keep` first)")
    manifest = read_manifest(src)
    blob = _blob(src, manifest)  # every part there and intact before anything is written
    run.mkdir(parents=True, exist_ok=True)
    members = _extract_run(src, run)
    folder = run / manifest["policy"]
    model = load_policy(blob, manifest, folder)
    targets = [folder] + ([run / "policy"] if manifest["step"] else [])
    for target in targets:
        model.save_pretrained(target)
    _extract_run(src, run)  # save_pretrained rewrote config.json and generation_config.json: the carried ones again
    if manifest["step"]:
        for f in folder.iterdir():  # the checkpoint's configs and tokenizer beside the weights
            if f.is_file() and f.suffix not in HEAVY and f.name != "trainer_state.json":
                shutil.copy2(f, run / "policy" / f.name)
        (run / "policy" / "step.txt").write_text(str(manifest["step"]))
    print(f"[carry] in: step {manifest['step']} ({manifest['policy']}) from {src}, {len(members)} run files")
    return manifest["step"]


def _extract_run(src: Path, run: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(src / TAR) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("run/")]
        for m in members:
            m.name = m.name[len("run/") :]
        tar.extractall(run, members=members, filter="data")
    return members


def copy_carry(files_at: Path, to: Path, missing: str) -> tuple[dict, list[str]]:
    """Replace `to` with a call's carry (parts checked first, tarball) and unpack its report files there; returns the
    manifest and the report files' names. `missing`: why a call's folder may hold no tarball."""
    if not (files_at / TAR).exists():
        raise SystemExit(f"{files_at}: no {TAR}: {missing}")
    manifest = read_manifest(files_at)
    _blob(files_at, manifest)  # every part there and intact before the old state is dropped
    if to.exists():
        shutil.rmtree(to)
    to.mkdir(parents=True)
    for name in [TAR] + [p["name"] for p in manifest["parts"]]:
        shutil.copyfile(files_at / name, to / name)  # not the device files' read-only mode
    with tarfile.open(to / TAR) as tar:
        report = [m for m in tar.getmembers() if m.name.startswith("report/")]
        tar.extractall(to, members=report, filter="data")
    return manifest, [m.name for m in report]


def keep(files_at: Path, to: Path) -> None:
    """Here, after a call: replace `to` with the call's carried state (parts and tarball) and list what it holds."""
    manifest, report = copy_carry(files_at, to, "the call ran without --carry-out or ended before it")
    print(f"kept step {manifest['step']} ({manifest['policy']}) in {to}; report files: {', '.join(report) or 'none'}")
    if manifest["left_behind"]:
        print(f"left behind on the machine (over {MAX_FILE >> 20} MiB): {', '.join(manifest['left_behind'])}")


# what a fork leaves out of its source's run folder: GRPO's state and what reports it
FORK_DROP = {"checkpoints", "policy", "curve.jsonl", "steps.jsonl", "points.jsonl.gz", "tb", "eval", "summary.json"}
FORK_DROP |= {"report.md", "train_rewards.png", "train_time.png", "forked.json"}


def fork(src: Path, to: Path) -> dict:
    """Write into `to` the carry of a new run whose warm start is the latest policy kept in `src` (module docstring);
    returns the new carry's manifest. `to` must not hold a carry already."""
    if (to / TAR).exists():
        raise SystemExit(f"{to}: already holds a carry; fork into an empty folder")
    with tempfile.TemporaryDirectory() as tmp:
        source, run = Path(tmp) / "source", Path(tmp) / "fork"
        step = restore(src, source)
        run.mkdir()
        for item in source.iterdir():
            if item.name not in FORK_DROP and item.name != "warm_start":
                (shutil.copytree if item.is_dir() else shutil.copy2)(item, run / item.name)
        policy = source / ("policy" if step else "warm_start")
        shutil.copytree(policy, run / "warm_start", ignore=shutil.ignore_patterns("step.txt"))
        meta = json.loads((source / "run.json").read_text()) if (source / "run.json").exists() else {"config": {}}
        meta["config"].pop("grpo", None)  # the fork's first call writes its own
        (run / "run.json").write_text(json.dumps(meta, indent=1))
        origin = {"from": str(src), "step": step, "policy": read_manifest(src)["policy"]}
        (run / "forked.json").write_text(json.dumps(origin, indent=1) + "\n")
        to.mkdir(parents=True, exist_ok=True)
        manifest = pack(run, to)
    print(f"forked {src} at step {step} into {to}: a new run's warm start")
    return manifest


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("keep", "fork"))
    p.add_argument("files_at", type=Path, help="keep: the device call's files folder; fork: a kept carry")
    p.add_argument("--to", type=Path, default=Path(".gpu/mstate"))
    args = p.parse_args(argv)
    (fork if args.what == "fork" else keep)(args.files_at, args.to)


if __name__ == "__main__":
    sys.exit(main())

"""One co-evolution round of configs/tiny-gpu.yaml across device calls, its state carried between machines.

    # each device call (carry .gpu/trainwheels, .gpu/kernelbench.jsonl and, from the second, .gpu/cstate):
    PYTHONPATH=$T:src python3 bench/coevolve_carry.py call --budget-s 540 --carry-in .gpu/cstate -- \\
        --config configs/tiny-gpu.yaml --set proposer.admission.benchmark_index=.gpu/kernelbench.jsonl ...
    # here, after each call:
    python bench/coevolve_carry.py keep /work/.device/<n> --to .gpu/cstate

`kernelzero train --config` (train/coevolve.py) resumes a run phase by phase from its folder, but a device machine
may be gone by the next call, and a call returns at most 8 files of 16 MiB (64 MiB together): the round's two
policies (Coder and Proposer, 44 MiB each in bfloat16 for the miniature's sizes) do not fit together. So the carry
holds what the round's next phase needs that is slow to redo:

- the Coder policy that phase starts from (the last finished Coder phase's, else the prepared start), in bfloat16
  parts (`miniature_carry.write_parts`);
- `state.tar.gz`: the run folder's small files (config as run, state.json, catalog, pool, finished phases'
  records and band pools, the verdict cache, the Coder's tokenizer and configs) and the call's report files.

Left behind, and how a restore copes: the Proposer's start policy (`proposer-init/`, a few minutes to warm-start):
while round 1's Proposer phase is unfinished, a restore drops `prepare` from state.json, so the next run redoes
prepare, which keeps the carried Coder warm start (it is on disk) and the pool, and warm-starts a new Proposer. An
unfinished phase's folder and records (its steps, its checkpoints, the Proposer's admissions) are not carried: it
starts over. A trained Proposer's policy is never carried, so a run of more rounds cannot resume a later round's
Proposer phase from a carry (refused, saying so). Nothing is carried when the round is done but its report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_out import out_dir  # noqa: E402
from miniature_carry import (  # noqa: E402
    HEAVY,
    MAX_FILE,
    TAR,
    _blob,
    _extract_run,
    copy_carry,
    load_policy,
    read_manifest,
    write_parts,
    write_tar,
)


def _state(root: Path) -> list[dict]:
    path = root / "state.json"
    return json.loads(path.read_text())["finished"] if path.exists() else []


def _next_coder(root: Path, finished: list[dict]) -> Path | None:
    """The Coder policy the run's next phase starts from: the last finished Coder phase's, else prepare's, else the
    Coder warm start a cut prepare left; None when there is none yet."""
    coders = [p["policy"] for p in finished if p["phase"].endswith("/coder")]
    prepared = [p["coder"] for p in finished if p["phase"] == "prepare"]
    if coders or prepared:
        return Path((coders or prepared)[-1])
    warm = root / "coder-init" / "warm_start"
    return warm if (warm / "config.json").exists() else None


def _dropped(root: Path, finished: list[dict]) -> list[Path]:
    """Folders of the run that never travel: the Proposer's policies and unfinished phases (with their records)."""
    done = {p["phase"] for p in finished}
    drop = [root / "proposer-init"]
    for folder in sorted(root.glob("round-*")):
        for phase in ("proposer", "coder"):
            name = f"{folder.name}/{phase}"
            if name not in done:
                drop.append(folder / phase)
            elif phase == "proposer":
                drop.append(folder / phase / "policy")
    if not any(p["phase"].endswith("/proposer") for p in finished):
        drop.append(root / "proposer")  # admissions of an unfinished first Proposer phase: it starts over
    return drop


def pack_run(root: Path, out: Path, report: list[Path] = ()) -> dict:
    """Write the round's carry into `out`: the next phase's Coder policy in parts, the small files in the tarball."""
    finished = _state(root)
    coder = _next_coder(root, finished)
    if coder is not None and not coder.is_relative_to(root):
        raise ValueError(
            f"the Coder policy {coder} is outside the run folder {root}: a given model.path is not carried"
        )
    parts, tensors = [], 0
    if coder is not None:
        state, parts = write_parts(coder, out)
        tensors = len(state)
    drop = _dropped(root, finished) + ([root / "coder-init"] if coder is None else [])  # a cut warm start restarts
    files, left = [], []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        if f.suffix in HEAVY or "checkpoints" in f.relative_to(root).parts or any(d in f.parents for d in drop):
            continue
        (left if f.stat().st_size > MAX_FILE else files).append(f.relative_to(root))
    manifest = {
        "phases": [p["phase"] for p in finished],
        "policy": str(coder.relative_to(root)) if coder is not None else None,
        "parts": parts,
        "tensors": tensors,
        "dtype": "bfloat16",
        "left_behind": [str(r) for r in left],
    }
    write_tar(out / TAR, root, files, report, manifest)
    mib = sum(p["bytes"] for p in parts) / 2**20
    print(f"[carry] out: after {manifest['phases'] or 'nothing'}; Coder {manifest['policy']} {mib:.1f} MiB", flush=True)
    return manifest


def restore_run(src: Path, root: Path, rounds: int = 1) -> dict:
    """Rebuild the run folder `root` from a carry in `src` (refused when the next phase needs a Proposer policy that
    did not travel); drops `prepare` from state.json when the Proposer's start policy must be made again."""
    if not (src / TAR).exists():
        raise FileNotFoundError(f"{src}: no {TAR} (keep a call's files with `coevolve_carry.py keep` first)")
    manifest = read_manifest(src)
    if "phases" not in manifest:
        raise ValueError(f"{src}: a miniature's carry, not a co-evolution round's")
    done = set(manifest["phases"])
    later = [r for r in range(2, rounds + 1) if f"round-{r}/proposer" not in done and f"round-{r - 1}/coder" in done]
    if later:
        raise ValueError(
            f"round {later[0]}'s Proposer phase needs round {later[0] - 1}'s Proposer, which no carry holds"
        )
    blob = _blob(src, manifest)  # every part there and intact before anything is written
    root.mkdir(parents=True, exist_ok=True)
    _extract_run(src, root)
    if manifest["policy"]:
        folder = root / manifest["policy"]
        load_policy(blob, manifest, folder).save_pretrained(folder)
        _extract_run(src, root)  # the carried configs again (save_pretrained rewrote them)
    if "round-1/proposer" not in done and (root / "state.json").exists():
        data = json.loads((root / "state.json").read_text())
        data["finished"] = [p for p in data["finished"] if p["phase"] != "prepare"]
        (root / "state.json").write_text(json.dumps(data, indent=1))  # prepare again: a new Proposer start
    print(f"[carry] in: after {manifest['phases'] or 'nothing'}; Coder {manifest['policy']} into {root}", flush=True)
    return manifest


def keep(files_at: Path, to: Path) -> None:
    """Here, after a call: replace `to` with the call's carry and unpack its report files beside it."""
    manifest, _ = copy_carry(files_at, to, "the call ended before it carried its state out")
    print(f"kept the round after {manifest['phases'] or 'nothing'} in {to} (Coder {manifest['policy']})")


def run_for(cmd: list[str], seconds: float) -> int:
    """Run `cmd` in its own process group, ended (the phases it started too) after `seconds`; its exit status, or
    -SIGTERM's when it was ended. A cut phase resumes at the next run, on this machine or from the carry."""
    proc = subprocess.Popen(cmd, start_new_session=True)
    try:
        return proc.wait(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        print(f"[call] stopped after {seconds:.0f} s: the run resumes from its folder next call", flush=True)
        return -signal.SIGTERM


def call(args: argparse.Namespace) -> int:
    """One device call: restore on a fresh machine, run the loop until the budget's end less the carry's time,
    print the phases' times, write the report and the carry into $OUT."""
    began = time.time()
    from kernelzero.cli.train import parse_overrides
    from kernelzero.train.coevolve_config import load_coevolve_config

    train = args.train
    conf = argparse.ArgumentParser()
    conf.add_argument("--config", required=True)
    conf.add_argument("--set", action="append", default=[])
    known, _ = conf.parse_known_args(train)
    cfg = load_coevolve_config(known.config, parse_overrides(known.set))
    root = Path(cfg.coder.run_dir)
    if args.carry_in and not root.exists() and (Path(args.carry_in) / TAR).exists():  # a fresh machine
        restore_run(Path(args.carry_in), root, cfg.loop.rounds)
    left = args.budget_s - (time.time() - began) - args.reserve_s
    status = run_for([sys.executable, "-m", "kernelzero", "train", *train], left)
    out = out_dir(args)
    subprocess.run([sys.executable, str(Path(__file__).parent / "coevolve_times.py"), str(root), "--steps"])
    if (root / "report.md").exists():
        shutil.copyfile(root / "report.md", out / "coevolve_report.md")
    report = []  # into the tarball: $OUT holds the report, the Coder's parts (3) and the tarball
    small = ("summary.json", "proposer-init/warm_start.jsonl", "proposer-init/follow.json")
    for rel in (*small, "round-1/proposer/proposals.jsonl", "round-1/proposer/steps.jsonl"):
        if (root / rel).exists():
            report.append(out / rel.replace("/", "_"))
            shutil.copyfile(root / rel, report[-1])
    pack_run(root, out, report)
    for f in report:
        f.unlink()
    return 0 if status in (0, -signal.SIGTERM) else status


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    argv, train = argv[:cut], argv[cut + 1 :]  # after --: the arguments of `kernelzero train`
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("call", "keep"))
    p.add_argument("files_at", nargs="?", type=Path, help="keep: the device call's files folder")
    p.add_argument("--to", type=Path, default=Path(".gpu/cstate"))
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--reserve-s", type=float, default=60.0, help="call: seconds kept for the report and the carry")
    p.add_argument("--carry-in", default=None, help="call: a fresh machine restores the state kept in this folder")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.train = train
    if args.what == "keep":
        if args.files_at is None:
            p.error("keep needs the call's files folder")
        keep(args.files_at, args.to)
        return 0
    if not train:
        p.error("call needs `-- --config FILE [--set KEY=VALUE ...]` (the arguments of `kernelzero train`)")
    return call(args)


if __name__ == "__main__":
    sys.exit(main())

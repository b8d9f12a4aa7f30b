"""The miniature's warm-started policy, brought back from a device call for study on a CPU.

    PYTHONPATH=$T:src python3 bench/miniature_export.py --run /tmp/mini_export      # on the GPU, writes to $OUT
    python bench/miniature_export.py --unpack <files_at> --to runs/miniature-export  # here: a loadable policy

On the GPU it does what the miniature's call 1 does up to the warm start (configs/tiny-gpu.yaml: the same tasks,
the same 23M model, the same schedule), except that the probe at step 1000 is not verified: it stops there as every
measured probe did (0.25-0.45 pass@1, inside the band, on 2026-12-06), which saves the probe's minute. The policy's
weights leave in bfloat16 (46 MB, in parts under the device's 16 MiB a file); its config, tokenizer and the GRPO
and held-out task files travel in one tarball. `--unpack` joins them into a folder that `from_pretrained` loads
(float32 weights rounded to bfloat16 once: not bit-identical to the GPU's policy) with its `tasks/` beside it.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tarfile
from pathlib import Path

PART_BYTES = 15 << 20  # under the device's 16 MiB a returned file


def export(run: Path, out: Path, config: str) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.train import coder
    from kernelzero.train.config import load_config
    from kernelzero.train.warm_start import sft_examples, warm_start

    cfg = load_config(config, {"run_dir": str(run)})
    run = coder._start(cfg)
    splits, solutions = coder.prepare_tasks(cfg, run)
    init = coder.prepare_policy(_no_warm(cfg), run, splits, solutions)
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForCausalLM.from_pretrained(init, dtype="float32")
    examples = sft_examples(splits["sft"], solutions, tok, cfg.backend)
    history = warm_start(model, tok, examples, cfg.warm_start, coder.device_of(cfg), cfg.seed, probe=lambda m: 1.0)
    print(f"warm start: {len(history)} steps, loss {history[-1]['loss']}", flush=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    state.pop("lm_head.weight", None)  # tied to the embedding (tiny.py): stored once
    part, size, index = {}, 0, 0
    for name in sorted(state):
        nbytes = state[name].numel() * 2
        if part and size + nbytes > PART_BYTES:
            save_file(part, str(out / f"weights_{index}.safetensors"))
            part, size, index = {}, 0, index + 1
        part[name], size = state[name], size + nbytes
    save_file(part, str(out / f"weights_{index}.safetensors"))
    with tarfile.open(out / "policy_files.tar.gz", "w:gz") as tar:
        for f in sorted(init.iterdir()):
            if not f.name.endswith(".safetensors"):
                tar.add(f, arcname=f"policy/{f.name}")
        for split in ("rl", "test"):
            tar.add(run / "tasks" / f"{split}.jsonl", arcname=f"tasks/{split}.jsonl")
        data = "".join(f"{h}\n" for h in history).encode()
        info = tarfile.TarInfo("warm_start.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _no_warm(cfg):
    import dataclasses

    return dataclasses.replace(cfg, warm_start=dataclasses.replace(cfg.warm_start, steps=0))


def unpack(files: Path, to: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    parts = sorted(files.glob("weights_*.safetensors"))
    if not parts or not (files / "policy_files.tar.gz").exists():
        raise SystemExit(f"{files}: no weights_*.safetensors or policy_files.tar.gz (run the export on the GPU first)")
    to.mkdir(parents=True, exist_ok=True)
    with tarfile.open(files / "policy_files.tar.gz") as tar:
        tar.extractall(to, filter="data")
    state = {}
    for p in parts:
        state.update({k: v.to(torch.float32) for k, v in load_file(str(p)).items()})
    save_file(state, str(to / "policy" / "model.safetensors"), metadata={"format": "pt"})
    print(f"{to / 'policy'}: {sum(v.numel() for v in state.values()):,} parameters from {len(parts)} parts")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", default="/tmp/mini_export", help="the run folder on the GPU machine")
    p.add_argument("--config", default="configs/tiny-gpu.yaml")
    p.add_argument("--unpack", type=Path, help="here: the device call's files folder")
    p.add_argument("--to", type=Path, default=Path("runs/miniature-export"))
    args = p.parse_args(argv)
    if args.unpack:
        unpack(args.unpack, args.to)
        return
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    export(Path(args.run), out, args.config)


if __name__ == "__main__":
    sys.exit(main())

"""Judge <-> worker transfer of one large tensor, through the pipe and through the transfer folder.

python3 bench/channel_bench.py [--mb 400]      (repo root, PYTHONPATH=src or installed)
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from kernelzero.verify.sandbox import channel  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=400)
    args = parser.parse_args()
    x = torch.randn(args.mb * 2**20 // 4)
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    folder = Path(tempfile.mkdtemp(dir=base))
    (folder / "in").mkdir()
    (folder / "out").mkdir()
    for mode in ("pipe", "transfer folder"):
        r, w = os.pipe()
        files = mode != "pipe"
        sink = channel.FileSink(folder / "in") if files else None
        channel.use_out_dir(str(folder / "out") if files else None)
        got: list = []
        reader = threading.Thread(target=lambda got=got, r=r: got.append(channel.recv_msg(r, file_dir=folder / "out")))
        reader.start()
        start = time.perf_counter()
        channel.send_msg(w, {}, [x])
        reader.join()
        back = time.perf_counter() - start
        reader = threading.Thread(target=lambda got=got, r=r: got.append(channel.recv_obj(r)))
        reader.start()
        start = time.perf_counter()
        channel.send_obj(w, {"inputs": [x]}, sink)
        reader.join()
        forth = time.perf_counter() - start
        assert torch.equal(got[0][1][0], x) and torch.equal(got[1]["inputs"][0], x)
        print(f"{mode}: judge -> worker {forth:.2f} s, worker -> judge {back:.2f} s ({args.mb} MB)")
        if sink:
            sink.clear()
        os.close(r)
        os.close(w)


if __name__ == "__main__":
    main()

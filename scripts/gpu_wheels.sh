#!/usr/bin/env bash
# Download the GPU gate's wheels (scripts/gpu_wheels.txt, exactly that list) into .gpu/wheels, for the GPU
# machine's Python 3.12 on x86_64 Linux, and print their total size. Run here, on a machine with network, before a
# device call that carries `.gpu` (scripts/gpu_tests.sh installs them there; the GPU machine has no network):
#   bash scripts/gpu_wheels.sh            # then: the device call with carry [".gpu"] runs `bash scripts/gpu_tests.sh`
# Ray's wheel is slimmed (scripts/gpu_wheels.py: its Java runtime dropped) so the set fits one call's 64 MiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dest=.gpu/wheels
limit_mib="${KZ_WHEELS_LIMIT_MIB:-55}"
mkdir -p "$dest"
rm -f "$dest"/*.whl
mapfile -t pins < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' scripts/gpu_wheels.txt | grep -v '^$')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dest" "${pins[@]}"
python3 scripts/gpu_wheels.py slim "$dest"
python3 scripts/gpu_wheels.py files "$dest"
total=$(du -cb "$dest"/*.whl | tail -1 | cut -f1)
ls -l "$dest" | awk 'NR > 1 {printf "%8.2f MiB  %s\n", $5 / 1048576, $9}'
mib=$(python3 -c "print(f'{$total / 2**20:.1f}')")
echo "${#pins[@]} wheels, $mib MiB in $dest (limit $limit_mib MiB; a device call carries at most 64 MiB)"
python3 -c "import sys; sys.exit($total > $limit_mib * 2**20)" || { echo "over $limit_mib MiB"; exit 1; }
# Optional, outside the list and its limit: py-spy (2.8 MiB), whose stacks of the GPU lease's holders the gate's
# monitor prints (scripts/gate_locks.py); a failed download costs the stacks only.
mkdir -p .gpu/tools && rm -f .gpu/tools/py_spy-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  -d .gpu/tools "py-spy==0.4.3" || echo "py-spy not downloaded: the gate's monitor prints no stacks"

#!/usr/bin/env bash
# Download, on a machine with a package index, the wheels the GPU machine lacks for the
# harness: Keras 3, libcst (for memlint) and the two needs of Keras the GPU image lacks
# (namex, optree; absl-py, h5py, ml-dtypes, numpy, packaging, rich are there, per the
# device tool's KINDS.md).  The GPU image runs Python 3.12 on x86-64.
# Usage: bash harness/fetch_wheels.sh [folder]   (default .whl, which must be git-ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:-.whl}"
mkdir -p "$dest"
exclude="$(git rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$dest/" "$exclude" 2>/dev/null || echo "/$dest/" >> "$exclude"
PY="${PYTHON:-python3}"
platforms=()
for n in 28 27 24 17; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d "$dest" \
    keras==3.15.1 namex==0.1.0 optree==0.20.0 libcst==1.9.0
ls -l "$dest"

#!/usr/bin/env bash
# Bundle a CUDA environment's pins for a GPU machine that has no package index and takes at
# most ~64 MiB per transfer: the apache-tvm wheel (~100 MB) is split into two parts.
#   part a: libtvm_compiler.so, xz-compressed (~57 MiB); sent first and kept in /tmp/stash
#   part b: the rest of TVM (3rdparty headers dropped), the cp312 wheels of the other pins,
#           the normalized cases, and run-on-gpu.sh, which reassembles and runs the harness.
# Usage: scripts/gpu/bundle.sh ENV_ID [PYTHON_VERSION]   (writes .gpu/a and .gpu/b)
set -euo pipefail
cd "$(dirname "$0")/../.."
env_id=${1:?environment id, e.g. a -cuda one}; pyver=${2:-3.12}
rm -rf .gpu && mkdir -p .gpu/a .gpu/b/cases /tmp/gpu-bundle
pins=$(.venv/bin/python -c "from tvmrepro.environments import default_catalog as c; print(' '.join(c().get('$env_id').requirements()))")
for pin in $pins; do
  case $pin in nvidia-cuda-nvrtc==*) continue ;; esac  # ~90 MB: the GPU machine's own is used
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    -d /tmp/gpu-bundle "$pin"
done
rm -rf /tmp/gpu-bundle/x && mkdir /tmp/gpu-bundle/x && unzip -q /tmp/gpu-bundle/apache_tvm-*.whl -d /tmp/gpu-bundle/x
xz -T0 -9 -c /tmp/gpu-bundle/x/tvm/lib/libtvm_compiler.so > .gpu/a/libtvm_compiler.so.xz
tar -C /tmp/gpu-bundle/x --exclude=tvm/lib/libtvm_compiler.so --exclude=tvm/3rdparty -cf - . | xz -T0 -6 > .gpu/b/tvm-rest.tar.xz
find /tmp/gpu-bundle -maxdepth 1 -name '*.whl' ! -name 'apache_tvm-*' -exec cp {} .gpu/b/ \;
.venv/bin/python - "$env_id" <<'PY'
import json, sys
from pathlib import Path
from tvmrepro.cases import load_case_file
from tvmrepro.environments import default_catalog
from worker.runner import harness_case
env = default_catalog().get(sys.argv[1])
for name, path in [("founding", "tests/cases/tvm-17357/case.json"), ("script", "tests/cases/tvm-17357/original.py"),
                   ("matmul", "tests/cases/cuda-matmul-relu/case.json")]:
    Path(f".gpu/b/cases/{name}.json").write_text(json.dumps(harness_case(load_case_file(Path(path)), env)))
PY
cp scripts/gpu/run-on-gpu.sh .gpu/b/gpu_run.sh
du -sh .gpu/a .gpu/b

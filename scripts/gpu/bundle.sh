#!/usr/bin/env bash
# Bundle what a GPU machine with no package index needs to run the service on a CUDA
# environment (scripts/gpu/service.sh there): the environment's pinned wheels, the service's
# locked wheels, bubblewrap. Such a machine takes at most ~64 MiB per transfer, so the bundle
# is cut into parts .gpu/1 .. .gpu/5 (wheels too big for one are split and joined there),
# each sent by one call that copies it into /tmp/stash; the last call runs the script.
# Usage: scripts/gpu/bundle.sh [ENV_ID]   (default tvm-0.27.0.post1-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
env_id=${1:-tvm-0.27.0.post1-cuda}
work=$(mktemp -d /tmp/gpu-bundle.XXXXXX)
trap 'rm -rf "$work"' EXIT
rm -rf .gpu && mkdir -p .gpu/1 .gpu/2 .gpu/3 .gpu/4 .gpu/5/svc
# The environment's pins, for its Python (3.12: the CUDA environments' own).
.venv/bin/tvmrepro images wheels "$work/env" "$env_id"
# The service's locked wheels for that Python; PostgreSQL's driver stays (SQLite there).
.venv/bin/tvmrepro images wheels "$work/svc" --service --python-version 3.12
rm -f "$work"/svc/psycopg*.whl
split_into() {  # wheel, first part's dir, second part's dir
  split -b 62000000 -a 2 "$1" "$work/$(basename "$1").part-"
  mv "$work/$(basename "$1").part-aa" "$2"/ && mv "$work/$(basename "$1").part-ab" "$3"/
}
split_into "$(ls "$work"/env/apache_tvm-[0-9]*.whl)" .gpu/1 .gpu/2
split_into "$(ls "$work"/env/nvidia_cuda_nvrtc-*.whl)" .gpu/3 .gpu/4
for wheel in "$work"/env/*.whl; do
  case $(basename "$wheel") in
    apache_tvm-[0-9]*|nvidia_cuda_nvrtc-*) ;;
    cuda_bindings-*) cp "$wheel" .gpu/4/ ;;
    *) cp "$wheel" .gpu/2/ ;;
  esac
done
cp "$work"/svc/uv-*.whl .gpu/4/
find "$work/svc" -name '*.whl' ! -name 'uv-*' -exec cp {} .gpu/5/svc/ \;
(cd .gpu/5 && apt-get download bubblewrap >/dev/null)
echo "$env_id" > .gpu/5/env_id
du -sh .gpu/*

#!/bin/bash
# On a GPU machine with no package index: the service (API and a worker, `tvmrepro up`, local
# runtime) serving a CUDA environment, driven over HTTP by the CLI. Expects the bundle of
# scripts/gpu/bundle.sh copied part by part into /tmp/stash (cp -r .gpu/N/. /tmp/stash/).
# Prints what it saw (statuses, outputs against NumPy, warm run times, whether the zygote ever
# opened a GPU device) and writes the runs' JSON under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/service.log") 2>&1
S=/tmp/stash W=/tmp/wheels REPO=$PWD
export TVMREPRO_HOME=/tmp/tvmrepro-home TVMREPRO_WHEELHOUSE=$W UV_OFFLINE=1 PYTHONPATH=$REPO
env_id=$(cat "$S/env_id")
step() { echo; echo "== $* ($(date +%T))"; }

step "reassemble the wheels"
mkdir -p "$W"
for first in "$S"/*.part-aa; do base=$(basename "$first" .part-aa); cat "$S/$base".part-* > "$W/$base"; done
cp "$S"/*.whl "$W"/ 2>/dev/null
ls -la "$W" | awk '{print $5, $9}'
command -v bwrap >/dev/null || dpkg -x "$S"/bubblewrap_*.deb /
bwrap --version
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
ls -l /dev/nvidia*; ldconfig -p | grep -E "libcuda.so.1" ; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

step "the service's environment (Python 3.12, the locked wheels)"
base=$(python3 -c "import sys; print(getattr(sys, '_base_executable', sys.executable))")
python3 -m pip install -q --no-index --no-deps --target /tmp/uv-tool "$W"/uv-*.whl || exit 1
/tmp/uv-tool/bin/uv venv -q --python "$base" /tmp/svc || exit 1
/tmp/uv-tool/bin/uv pip install -q --python /tmp/svc/bin/python --no-deps "$S"/svc/*.whl "$W"/uv-*.whl || exit 1
tvmrepro() { /tmp/svc/bin/python -m cli "$@"; }

step "provision $env_id from the wheels"
time tvmrepro env provision "$env_id" || exit 1
tvmrepro env list | grep -E "cuda|ENV" | head -5

step "tvmrepro up --env $env_id"
setsid /tmp/svc/bin/python -m cli up --env "$env_id" > /tmp/up.log 2>&1 < /dev/null &
up_pid=$!
for i in $(seq 1 120); do
  if tvmrepro run scripts/gpu/cases/matmul-relu.json --env "$env_id" --json > "$OUT/first.json" 2>/tmp/first.err; then break; fi
  sleep 2
done
echo "first run after $((i * 2)) s or less"; tail -3 /tmp/first.err; tail -5 /tmp/up.log

summary() {  # label file
  /tmp/svc/bin/python - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
for r in json.load(open(path))["runs"]:
    iso, took = r.get("isolation") or {}, r.get("seconds") or {}
    print(f"{label}: {r['environment']} {r.get('variant')}: {r['status']} at {r.get('stage')}"
          f" {r.get('error_type') or ''} (run {took.get('total')} s, harness {took.get('harness')} s;"
          f" warm={iso.get('warm')} sandbox={iso.get('sandbox')} uid={iso.get('uid')}"
          f" cgroup={'yes' if iso.get('cgroup') else 'none'} gpu={iso.get('gpu')})")
    out, ref = r.get("outputs"), r.get("reference_outputs")
    if out:
        print(f"   output sum {out.get('sum')} sha256 {out.get('sha256', '')[:16]}"
              + (f"; NumPy reference sum {ref.get('sum')} sha256 {ref.get('sha256', '')[:16]}:"
                 f" {'equal' if ref.get('sha256') == out.get('sha256') else 'DIFFERENT'}" if ref else ""))
    if r.get("message"):
        print("   message:", r["message"][:300])
PY
}
summary first "$OUT/first.json"

step "matmul + relu against NumPy, three warm runs"
for n in 1 2 3; do
  s=$(date +%s.%N)
  tvmrepro run scripts/gpu/cases/matmul-relu.json --env "$env_id" --json --bypass-cache > /tmp/m$n.json
  e=$(date +%s.%N)
  summary "matmul $n (wall $(python3 -c "print(round($e - $s, 2))") s)" /tmp/m$n.json
done
cp /tmp/m3.json "$OUT/matmul.json"

step "the founding case (apache/tvm#17357) with target cuda"
python3 - <<'PY'
import json
case = json.load(open("tests/cases/tvm-17357/case.json"))
case["target"] = "cuda"
json.dump(case, open("/tmp/founding-cuda.json", "w"))
PY
tvmrepro run /tmp/founding-cuda.json --env "$env_id" --json --bypass-cache > "$OUT/founding.json"
summary founding "$OUT/founding.json"

step "a run asking for more GPU memory than the device has, then one more run"
tvmrepro run scripts/gpu/cases/gpu-memory-hog.json --env "$env_id" --json --bypass-cache > "$OUT/hog.json"
summary "GPU memory hog" "$OUT/hog.json"
tvmrepro run scripts/gpu/cases/matmul-relu.json --env "$env_id" --json --bypass-cache > /tmp/after.json
summary "matmul after the hog" /tmp/after.json

step "a run taking 8 GiB of host memory under memory_mb 2048 (no cgroup here: RLIMIT_DATA)"
tvmrepro run scripts/gpu/cases/host-memory-hog.json --env "$env_id" --json --bypass-cache > /tmp/host.json
summary "host memory hog" /tmp/host.json

step "the zygotes never opened a GPU device (the runs forked from them did)"
zygotes=0 on_gpu=0
for pid in $(pgrep -f -- "^/mnt/env/bin/python -m harness --zygote"); do
  zygotes=$((zygotes + 1))
  if ls -l /proc/$pid/fd 2>/dev/null | grep -q /dev/nvidia; then on_gpu=$((on_gpu + 1)); fi
done
echo "processes started as a zygote (zygotes and the waiting sandboxes they forked): $zygotes; with a /dev/nvidia* descriptor open: $on_gpu"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
tail -20 /tmp/up.log
kill -INT -- -$up_pid; sleep 5; kill -9 -- -$up_pid 2>/dev/null
step done

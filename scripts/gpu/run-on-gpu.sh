#!/bin/bash
# On the GPU machine: reassemble the bundle of scripts/gpu/bundle.sh (part a already copied
# to /tmp/stash by the first transfer) and run the harness on the shared cases there.
set -u
T0=$(date +%s.%N)
mkdir -p /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/b/*.whl || exit 1
tar -C /tmp/site -xJf .gpu/b/tvm-rest.tar.xz
xz -dc /tmp/stash/libtvm_compiler.so.xz > /tmp/site/tvm/lib/libtvm_compiler.so
T1=$(date +%s.%N)
python3 -c "print('reassembled in', round($T1 - $T0, 1), 's')"
export PYTHONPATH=/tmp/site:$PWD/images TVM_BACKTRACE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import sys, tvm, numpy, cuda.bindings; print(sys.version.split()[0], tvm.__version__, numpy.__version__, cuda.bindings.__version__, tvm.cuda().exist, tvm.cuda().compute_version)"
python3 -m pip show nvidia-cuda-nvrtc 2>/dev/null | grep -E "^(Name|Version)"
run() {  # case variant
  mkdir -p /tmp/w-$1-$2 && rm -f /tmp/ev-$1-$2.jsonl
  s=$(date +%s.%N)
  python3 -m harness .gpu/b/cases/$1.json --variant $2 --events /tmp/ev-$1-$2.jsonl --workdir /tmp/w-$1-$2 > /tmp/log-$1-$2.txt 2>&1
  e=$(date +%s.%N)
  cp /tmp/ev-$1-$2.jsonl $OUT/ev-$1-$2.jsonl
  python3 - "$1" "$2" "$(python3 -c "print($e - $s)")" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(f"/tmp/ev-{sys.argv[1]}-{sys.argv[2]}.jsonl")]
r = next(e for e in reversed(evs) if e["event"] == "result")
print(f"{sys.argv[1]}/{sys.argv[2]}: status={r['status']} stage={r['stage']} wall={float(sys.argv[3]):.2f}s harness={r['harness_seconds']}s run={r.get('run_seconds')}")
print("   signature:", r["signature"]); print("   outputs:", r["outputs"]); print("   rewrites:", r["rewrites"])
print("   passes:", [e["name"] for e in evs if e["event"] == "pass"])
PY
  tail -3 /tmp/log-$1-$2.txt | cut -c1-300
}
run founding fusetir-once
run founding fusetir-twice
run script script
run matmul default
python3 - <<'PY'
# Check the GPU result against numpy with the harness's own seeded inputs.
import numpy as np, json
rng = np.random.RandomState(0)
x = rng.standard_normal((256, 256)).astype("float32"); w = rng.standard_normal((256, 256)).astype("float32")
ref = np.maximum(x @ w, 0)
print("numpy reference sum", float(ref.astype(np.float64).sum()))
PY
cat > /tmp/bench.py <<'PY'
import time, numpy as np, tvm
from tvm import relax
from tvm.script import ir as I, relax as R
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((256, 256), "float32"), w: R.Tensor((256, 256), "float32")) -> R.Tensor((256, 256), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(y)
            R.output(z)
        return z
t = time.perf_counter(); ex = tvm.compile(Module, target=tvm.target.Target("cuda")); tb = time.perf_counter() - t
dev = tvm.cuda(); vm = relax.VirtualMachine(ex, dev)
rng = np.random.RandomState(0)
x = rng.standard_normal((256, 256)).astype("float32"); w = rng.standard_normal((256, 256)).astype("float32")
out = vm["main"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev)).numpy()
print("build", round(tb, 2), "s; max abs err", float(np.abs(out - np.maximum(x @ w, 0)).max()))
f = vm.time_evaluator("main", dev, number=100, repeat=5)
print("per call", f(tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev)))
PY
python3 /tmp/bench.py 2>&1 | tail -8
python3 -c "print('total', round($(date +%s.%N) - $T0, 1), 's')"

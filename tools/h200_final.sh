#!/usr/bin/env bash
# The H200 acceptance run for the norm family: tests, cold compiles, harness tables (issue 3).
# Usage (device tool): bash tools/h200_final.sh   with .whl carried; results under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
git rev-parse --short HEAD 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== variant sweep (decode-sized early weights)"
python3 tools/norm_variants.py 2>&1 | tee $OUT/variants.txt
echo "== cold compile (fresh caches)"
export EMBER_CACHE_DIR=/tmp/ember-cache-cold
python3 - <<'PY' 2>&1 | tee $OUT/compile.txt
import time, torch, tvm_ffi
from ember.jit import build_and_load
from ember.ops.norm import norm_spec
for d in ("bf16", "fp16", "fp32"):
    t = time.perf_counter(); build_and_load(norm_spec(d)); print(f"ember cold compile norm_{d}: {time.perf_counter()-t:.2f} s")
import flashinfer
x = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16); w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
t = time.perf_counter(); flashinfer.norm.rmsnorm(x, w); torch.cuda.synchronize(); print(f"flashinfer cold norm module (first call): {time.perf_counter()-t:.2f} s")
PY
echo "== tests"
python3 -m pytest -q tests/ops tests/unit tests/jit/test_norm_compile.py -p no:cacheprovider --junitxml=$OUT/tests.xml 2>&1 | tail -4
B="python3 -m ember.bench"
P="--backends ember,torch,torch_compile,flashinfer,liger --dtypes bf16 --out $OUT/bench.jsonl -q"
$B ceilings --out $OUT/bench.jsonl 2>&1 | tail -5
$B rmsnorm --shapes 8192x8192,8192x4096,4096x5120,8192x16384 --timing cuda_event $P 2>&1 | tee $OUT/t_rms.md | tail -16
$B fused_add_rmsnorm --shapes 8192x8192,8192x4096 --timing cuda_event $P 2>&1 | tee $OUT/t_fused.md | tail -12
$B rmsnorm --shapes 1x4096,16x4096,64x4096,128x4096,1x5120,16x5120,64x5120 --timing cuda_graph $P 2>&1 | tee $OUT/t_rms_small.md | tail -14
$B fused_add_rmsnorm --shapes 1x4096,64x4096,1x5120,64x5120 --timing cuda_graph $P 2>&1 | tee $OUT/t_fused_small.md | tail -10
$B host --out $OUT/bench.jsonl -q 2>&1 | tee $OUT/t_host.md | tail -10

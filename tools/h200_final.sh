#!/usr/bin/env bash
# The H200 acceptance run for the norm family: cold compiles, the GPU test suite, harness tables.
# Usage (device tool): bash tools/h200_final.sh   with .whl carried; everything lands under $OUT,
# most important first, so a run cut short still returns what it finished.
# Name the commit the rows should record (the device's copy of the checkout has a stale .git):
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) on this machine, pasted into the command.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== cold compile (fresh caches)"
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
python3 -m pytest -q tests/ops -p no:cacheprovider 2>&1 | tail -4 | tee $OUT/tests.txt
B="python3 -m ember.bench"
P="--backends ember,torch,torch_compile,flashinfer,liger --dtypes bf16 --out $OUT/bench.jsonl -q"
$B rmsnorm --shapes 8192x8192,8192x4096,4096x5120,8192x16384 --timing cuda_event $P > $OUT/t_rms.md 2>&1; tail -14 $OUT/t_rms.md
$B rmsnorm --shapes 8192x8192,8192x4096,4096x5120,8192x16384 --timing cuda_graph $P >> $OUT/t_rms.md 2>&1; tail -14 $OUT/t_rms.md
# CUPTI kernel time when cupti-python is carried (.whl: cupti-python 13.0.1 + pyelftools); `auto`
# falls back to events, with a note in each row, where it is not importable or fails.
$B rmsnorm --shapes 8192x8192,8192x16384 --timing auto $P > $OUT/t_rms_auto.md 2>&1; tail -6 $OUT/t_rms_auto.md
$B fused_add_rmsnorm --shapes 8192x8192,8192x4096 --timing cuda_event $P > $OUT/t_fused.md 2>&1; tail -10 $OUT/t_fused.md
$B fused_add_rmsnorm --shapes 8192x8192,8192x4096 --timing cuda_graph $P >> $OUT/t_fused.md 2>&1; tail -10 $OUT/t_fused.md
$B rmsnorm --shapes 1x4096,16x4096,64x4096,128x4096,1x5120,16x5120,64x5120 --timing cuda_graph $P > $OUT/t_rms_small.md 2>&1; tail -12 $OUT/t_rms_small.md
$B host --out $OUT/bench.jsonl -q > $OUT/t_host.md 2>&1; tail -8 $OUT/t_host.md
$B fused_add_rmsnorm --shapes 1x4096,64x4096,1x5120,64x5120 --timing cuda_graph $P > $OUT/t_fused_small.md 2>&1; tail -8 $OUT/t_fused_small.md
echo "== the rest of the suite"
timeout 420 python3 -m pytest -q tests -p no:cacheprovider --ignore=tests/ops 2>&1 | tail -6 | tee -a $OUT/tests.txt

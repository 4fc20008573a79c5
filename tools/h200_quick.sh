#!/usr/bin/env bash
# First GPU pass: install carried wheels, cold-compile timings, GPU tests, quick norm numbers.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import torch, tvm_ffi; print('torch', torch.__version__, 'tvm_ffi', tvm_ffi.__version__, 'dlpack api', hasattr(torch.Tensor, '__dlpack_c_exchange_api__'))"
nproc
echo "== cold compile: ember norm_bf16 (fresh cache)"
python3 - <<'PY'
import time, logging
logging.basicConfig(level=logging.INFO)
from ember.jit import build_and_load
from ember.ops.norm import norm_spec
for d in ("bf16", "fp16", "fp32"):
    t = time.perf_counter(); build_and_load(norm_spec(d)); print(f"ember cold compile norm_{d}: {time.perf_counter()-t:.2f} s")
PY
echo "== cold compile: flashinfer norm (fresh workspace)"
FLASHINFER_WORKSPACE_BASE=/tmp/fiws python3 - <<'PY'
import time, torch
t = time.perf_counter(); import flashinfer; print(f"import flashinfer {time.perf_counter()-t:.2f} s")
x = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16); w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
t = time.perf_counter(); flashinfer.norm.rmsnorm(x, w); torch.cuda.synchronize(); print(f"flashinfer cold norm module (first call): {time.perf_counter()-t:.2f} s")
PY
echo "== GPU tests"
python3 -m pytest -q tests/ops -p no:cacheprovider --junitxml=$OUT/ops.xml 2>&1 | tail -30
echo "== quick numbers"
FLASHINFER_WORKSPACE_BASE=/tmp/fiws python3 tools/quick_norm.py 2>&1 | tee $OUT/quick.txt | grep -v Warning

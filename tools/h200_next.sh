#!/usr/bin/env bash
# The first H200 call after the session-6 changes, in one call (device tool, `.whl` carried;
# output under $OUT; at most ~9.5 minutes, so run it with timeout_s 600): issue 5's short check
# (filters v2 and the survivor-list A/B, activations v2, RoPE v2 and its A/B, the compile split),
# issue 6's GPU half (tools/h200_apilog.py), issue 7's GPU tests (trace references against the
# ops, the tutorial kernel). Each step is bounded so one hang cannot eat the call.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.sampling import sampling_spec
t = time.perf_counter(); build_and_load(sampling_spec('fp32')); print(f'cold compile sampling_fp32: {time.perf_counter() - t:.2f} s')" | tee $OUT/compile.txt
timeout 370 bash tools/h200_issue5_check.sh
echo "== issue 6 (api logging)"
timeout 70 python3 tools/h200_apilog.py --calls 5000 --rounds 3 > $OUT/apilog.txt 2>&1; echo "rc $?"; tail -15 $OUT/apilog.txt
echo "== issue 7 (trace references, tutorial)"
timeout 80 python3 -m pytest -q tests/ops/test_trace_refs.py tests/jit/test_tutorial.py -p no:cacheprovider > $OUT/tests_trace.txt 2>&1; echo "rc $?"; grep -E "passed|failed|^E " $OUT/tests_trace.txt | head -15

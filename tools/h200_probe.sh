#!/usr/bin/env bash
# Diagnostic run for the norm family (device tool, `.whl` carried): A/B probe of kernel variants
# against the peers, host-cost breakdown, Nsight Compute on two shapes (EMBER_PROBE_NCU=1).
# Arguments go to tools/norm_probe.py (e.g. --only host,big). Output under $OUT.
# Name the commit the rows should record (the device's copy of the checkout has a stale .git):
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) on this machine, pasted into the command.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
# EMBER_PROBE_TESTS=0 skips the GPU norm tests (saves ~1 min of device time on a sweep).
[ "${EMBER_PROBE_TESTS:-1}" = 0 ] || python3 -m pytest -q -x tests/ops -p no:cacheprovider 2>&1 | tail -5 | tee $OUT/tests.txt
python3 tools/norm_probe.py "$@" 2>&1 | tee $OUT/probe.txt
[ "${EMBER_PROBE_NCU:-0}" = 1 ] || exit 0
echo "== ncu"
timeout 150 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,gpc__cycles_elapsed.max,smsp__inst_executed.sum,launch__registers_per_thread,launch__block_size,launch__grid_size,dram__bytes_read.sum,dram__bytes_write.sum,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct python3 tools/norm_probe.py --ncu > $OUT/ncu.txt 2>&1; echo "ncu rc $?"; grep -E "rmsnorm|norm|triton|gpu__time|gpc__cycles|inst_executed|registers|dram__bytes|stalled|block_size|grid_size|ncu launch" $OUT/ncu.txt | head -150

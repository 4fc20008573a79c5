#!/usr/bin/env bash
# Decode variant probe + ncu stall counters, then the decode acceptance tables (tools/h200_decode.sh
# without the rest of the suite). Device tool, `.whl` carried; output under $OUT.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_decode_probe.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache
echo "== probe"
timeout 200 python3 tools/decode_probe.py --variants base,s2 --cases u64,u256,u128,skew,small,page1 2>&1 | tee $OUT/probe.txt | grep -v "^built"
timeout 100 python3 tools/decode_probe.py --variants base,s2,f3 --cases fp8,fp8skew 2>&1 | tee -a $OUT/probe.txt | grep -v "^built"
echo "== ncu"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem,smsp__inst_executed.sum
S=smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_no_instruction_per_warp_active.pct,smsp__warp_issue_stalled_selected_per_warp_active.pct,smsp__issue_active.avg.pct_of_peak_sustained_active
for c in u64 fp8; do
  timeout 90 ncu --clock-control none --kernel-name regex:decode_tc --launch-count 1 --metrics $M,$S python3 tools/decode_probe.py --variants base --cases $c --rounds 1 > $OUT/ncu_$c.txt 2>&1
  echo "ncu $c rc $?"; grep -E "decode_tc|gpu__time|dram__|warps_active|registers|occupancy|inst_executed|stalled|issue_active" $OUT/ncu_$c.txt | head -30
done
SKIP_REST=1 bash tools/h200_decode.sh

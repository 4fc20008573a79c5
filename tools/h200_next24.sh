#!/usr/bin/env bash
# Session 13's third H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# why softmax_pair_kernel is slow (call 2: bf16 64 x 128 256 78.3 us against 22.4 for the 8-CTA
# clusters; fp32 128 rows 55.5 against 43.5): Nsight Compute on one launch of each, with the
# source counters ranked by tools/ncu_source_top.py
source tools/h200_lib.sh  # wheels, environment, bench, tests
cat > /tmp/pair.py <<'PY'
import sys, torch, ember
x = (4 * torch.randn(int(sys.argv[2]), 128256, device="cuda")).to(getattr(torch, sys.argv[1]))
for _ in range(4):
    ember.softmax(x, 0.8)
torch.cuda.synchronize()
PY
python3 /tmp/pair.py bfloat16 8; python3 /tmp/pair.py float32 8  # builds the modules outside the profiler
for c in "bfloat16 64" "float32 128"; do
  set -- $c
  timeout 150 ncu --clock-control none --kernel-name regex:softmax_pair --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section SourceCounters --section MemoryWorkloadAnalysis -f -o /tmp/rep_$1 python3 /tmp/pair.py $1 $2 > $OUT/ncu_$1.txt 2>&1
  echo "== ncu $1 $2 rc $?"
  ncu --import /tmp/rep_$1.ncu-rep --print-details all 2>/dev/null | grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Ipc|Stall|Block Limit|Grid Size|Cluster|Shared Memory Configuration|L1/TEX Hit|L2 Hit|Mem Busy|Bank" | head -45
  python3 tools/ncu_source_top.py /tmp/rep_$1.ncu-rep 25 --csv-out $OUT/ncu_src_$1.csv | head -60
done

#!/usr/bin/env bash
# Session 21 (device tool, `.whl` carried; any Hopper card): where the fp8 decode kernel's warps
# wait (h100_next61.sh found no pipe near its peak: ALU 54 %, issue slots 57 %, 4.66 cycles
# between a warp's instructions at 12 warps an SM): stall reasons per issued instruction, and
# ncu's source page (instructions and warp samples by SASS line) at 64 x 4096 32/8 e4m3.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next62.sh
source tools/h200_lib.sh
STALLS=$(ncu --query-metrics 2>/dev/null | grep -oE "^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active" | sort -u | sed 's/$/.ratio/' | paste -sd, -)
SH="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cuda_event -q"
timeout 200 ncu --clock-control none --launch-skip 3 --launch-count 1 --kernel-name regex:decode_tc --section SourceCounters --section WarpStateStats --metrics $STALLS -o $OUT/r_fp8 python3 -m ember.bench decode --backends ember $SH > $OUT/ncu_fp8.txt 2>&1
echo "ncu rc $?"
ncu -i $OUT/r_fp8.ncu-rep --page raw --csv 2>/dev/null | python3 -c "
import csv,sys
rows=list(csv.reader(sys.stdin)); h,v=rows[0],rows[-1]
for k,x in sorted(zip(h,v), key=lambda t: -float(t[1].replace(',','')) if t[1].replace(',','').replace('.','',1).isdigit() else 0):
    if 'issue_stalled' in k and x.replace(',','').replace('.','',1).isdigit() and float(x.replace(',',''))>0.02: print(f'{k:90s} {x}')
" | tee $OUT/stalls.txt
timeout 120 python3 tools/ncu_source_top.py $OUT/r_fp8.ncu-rep 45 --csv-out $OUT/sass_fp8.csv > $OUT/top_fp8.txt 2>&1
echo "top rc $?"; head -120 $OUT/top_fp8.txt
echo "== done at ${SECONDS}s"

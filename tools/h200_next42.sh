#!/usr/bin/env bash
# Session 16, last call (device tool, `.whl` carried; output under $OUT; timeout_s 300): ncu
# counters for the decode gap at 256 x 1024 64/8 bf16 (0.94x FlashInfer at the same grid,
# occupancy and bytes; fewer instructions and the grid order changed nothing): bytes moved at
# each level, stall reasons and the scheduler, ember's kernel and FlashInfer's side by side.
# Diagnostic only: it decides the next experiment (notes/decode.md, "Session 16").
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> [STALLS=1] bash tools/h200_next42.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__cycles_active.avg
NCU="ncu --clock-control none --launch-skip 5 --launch-count 1 --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --metrics $M"
D="decode --shapes 256x1024x64x8x128x16 --timing cuda_event -q"
if [ "${STALLS:-0}" = 1 ]; then  # second form: the stall reasons a issued instruction
  NCU="ncu --clock-control none --launch-skip 5 --launch-count 1 --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
  timeout 90 $NCU --kernel-name regex:decode_tc python3 -m ember.bench $D --backends ember > $OUT/ncu3_ember.txt 2>&1
  timeout 150 $NCU --kernel-name regex:Prefill python3 -m ember.bench $D --backends flashinfer > $OUT/ncu3_fi.txt 2>&1
  paste <(grep -E "stalled_" $OUT/ncu3_ember.txt | awk '{print $1, $NF}') <(grep -E "stalled_" $OUT/ncu3_fi.txt | awk '{print $NF}') | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | sort -k2 -nr
  exit 0
fi
timeout 90 $NCU --kernel-name regex:decode_tc python3 -m ember.bench $D --backends ember > $OUT/ncu2_ember.txt 2>&1
timeout 150 $NCU --kernel-name regex:Prefill python3 -m ember.bench $D --backends flashinfer > $OUT/ncu2_fi.txt 2>&1
for f in $OUT/ncu2_ember.txt $OUT/ncu2_fi.txt; do echo "== $f"; grep -E "dram__|lts__|smsp__inst|sm__warps|bank_conflicts|cycles_active|Stall|stall|Issued Warp|Eligible|No Eligible|Active Warps" $f | head -30; done
echo "== done at ${SECONDS}s"

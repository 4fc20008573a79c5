#!/usr/bin/env bash
# Session 21 (device tool, `.whl` carried; timeout_s 600; any Hopper card: the fp8 decode kernel
# streams ~2.4 TB/s on the H200, below both cards' copy limits, so an H100 can show its limit):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next61.sh
# (1) fp8 and bf16 decode at 64 x 4096 32/8 d128 page 16, ember and both FlashInfer paths;
# (2) ncu on ember's fp8 and bf16 kernels and FlashInfer's fp8 tensor-core kernel: issue rate,
#     warp stalls and each pipe's share of its peak (the hypothesis: a half-rate integer pipe,
#     not the issue slots, bounds the fp8 loop's conversions).
source tools/h200_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
SH=64x4096x32x8x128x16
step 90 fp8 && bench fp8 90 decode --backends ember,flashinfer --shapes $SH --kv-dtype e4m3 --timing cupti
step 40 bf16 && bench bf16 40 decode --backends ember --shapes $SH --timing cupti
PIPES=$(ncu --query-metrics 2>/dev/null | grep -oE "^sm__(inst_executed_pipe|pipe)_[a-z0-9_]+" | sort -u | sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd, -)
echo "pipes: $PIPES" | cut -c1-400
NCU="ncu --clock-control none --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --metrics $PIPES"
prof() {  # TAG KERNEL_REGEX LIMIT ARGS...
  local tag=$1 k=$2 t=$3; shift 3
  step $t ncu_$tag || return
  timeout $t $NCU --kernel-name regex:$k python3 -m ember.bench decode --shapes $SH --timing cuda_event -q "$@" > $OUT/ncu_$tag.txt 2>&1
  echo "== ncu $tag rc $?"
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Registers Per|Achieved Occ|Stall|pct_of_peak" $OUT/ncu_$tag.txt | grep -vE " 0(\.0+)?$" | head -40
}
prof fp8 decode_tc 120 --backends ember --kv-dtype e4m3
prof bf16 decode_tc 100 --backends ember
prof fi_fp8 BatchPrefill 150 --backends flashinfer[tensor_cores] --kv-dtype e4m3
echo "== done at ${SECONDS}s"

#!/usr/bin/env bash
# For session 15 (device tool, `.whl` carried WITH cupti-python 13.0.x and pyelftools; output
# under $OUT; timeout_s 600). Profiles before more kernel code (CONTRIBUTING, "What session 14
# taught"), then issue 4's table, each step skipped when the call's 600 s would not hold it:
#   1. ncu on softmax_grid_kernel at 128 x 128 256 fp32 (the default; 40.7 us, target <= 37.1):
#      DRAM throughput, warp stalls (the spin on the row's count shows as long-scoreboard /
#      branch-resolving stalls of warp 0 while the other 15 wait at the barrier), and the
#      memset's share (the harness's CUPTI rows sum every device activity of a call)
#   2. ncu on the fp8 decode kernel at 64 x 4096 (2.49 TB/s; cvt and lazy changed nothing, so
#      not issue-bound): memory workload (L1/L2/DRAM, cp.async stalls), warp state, occupancy
#   3. issue 4's table against both FlashInfer paths (last full run at ec96584)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next32.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
NCU="ncu --clock-control none --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
step 120 ncu_softmax && timeout 120 $NCU --kernel-name regex:softmax_grid python3 -m ember.bench softmax --backends ember --shapes 128x128256 --dtypes fp32 --timing cuda_event -q > $OUT/ncu_softmax.txt 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots|Warp Cycles Per Issued|Stall|Achieved Occupancy|Grid Size|Registers" $OUT/ncu_softmax.txt | head -30
step 120 ncu_fp8 && timeout 120 $NCU --kernel-name regex:decode_tc python3 -m ember.bench decode --backends ember --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cuda_event -q > $OUT/ncu_fp8.txt 2>&1
grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Issue Slots|Warp Cycles Per Issued|Stall|Achieved Occupancy|Registers" $OUT/ncu_fp8.txt | head -30
B="decode --backends ember,flashinfer"
step 200 uniform && bench uniform 200 $B --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16
step 60 skewed && bench skewed 60 $B --shapes 64x4096x32x8x128x16 --lengths pareto
step 90 small_page1 && bench small_page1 90 $B --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1
step 60 fp8 && bench fp8 60 $B --shapes 64x4096x32x8x128x16 --kv-dtype e4m3
echo "== done at ${SECONDS}s"

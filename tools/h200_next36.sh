#!/usr/bin/env bash
# For session 16 (device tool, `.whl` carried with cupti-python 13.0.x and pyelftools; output
# under $OUT; timeout_s 600): EMBER_SOFTMAX_BULK=1 (softmax_bulk_kernel, written in session 15,
# compiled, never run: one CTA of 1 024 threads an SM, 3 fp32 / 6 bf16 raw chunks in shared
# memory filled by cp.async.bulk two / five rows ahead). Predicted at 128 x 128 256 (default
# 40.9 fp32 / 37.3 bf16 under CUPTI): 35-38 fp32, 30-34 bf16 if bytes in flight are what limit
# (session 15's look-back); if it is slower, the one-CTA-an-SM structure is, as with PIPE.
#   1. its softmax GPU tests (all of tests/ops/test_sampling.py under the switch)
#   2. the A/B against the default, 128 and 64 rows, fp32 and bf16; the peers at 128 rows
#   3. with 2 fp32 / 4 bf16 chunks (EMBER_SOFTMAX_BULK_KB=128); ncu on it (DRAM, warp stalls)
#   4. the fp8 decode kernel at 4 CTAs an SM (decode_probe.py fp8r4; 3 stages alone: f3)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next36.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
B=-DEMBER_SOFTMAX_BULK=1
S=128x128256,64x128256
EMBER_EXTRA_CUDA_FLAGS=$B tests bulk 120 tests/ops/test_sampling.py -x
step 60 ab && EMBER_EXTRA_CUDA_FLAGS=$B bench bulk 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
step 60 ab && bench base 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
step 120 peers && bench peers 120 softmax --backends torch_compile,flashinfer --shapes 128x128256 --dtypes fp32,bf16
step 45 bulk128 && EMBER_EXTRA_CUDA_FLAGS="$B -DEMBER_SOFTMAX_BULK_KB=128" bench bulk128 45 softmax --backends ember --shapes 128x128256 --dtypes fp32,bf16
step 60 ncu && EMBER_EXTRA_CUDA_FLAGS=$B timeout 60 ncu --clock-control none --launch-skip 5 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section Occupancy --kernel-name regex:softmax_bulk python3 -m ember.bench softmax --backends ember --shapes 128x128256 --dtypes fp32 --timing cuda_event -q > $OUT/ncu_bulk.txt 2>&1
grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Achieved Occupancy" $OUT/ncu_bulk.txt | head
step 90 fp8r4 && timeout 90 python3 tools/decode_probe.py --variants base,fp8r4,f3 --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe_fp8.txt
echo "== done at ${SECONDS}s"

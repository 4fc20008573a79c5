#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried with cupti-python and pyelftools; output under
# $OUT; timeout_s 600). Two experiments written in session 16, compiled, never run:
#   1. EMBER_SOFTMAX_GRID_C=16: softmax_grid_kernel with 16 chunks a row, CTAs of 256 threads,
#      4 an SM (the same registers and bytes in flight an SM as the default's 2 of 512, but four
#      CTAs in different phases; 16 pairs an exchange, combined in one online pass). Its
#      sampling GPU tests, then the A/B at 128 / 64 rows fp32 and bf16 (default 40.9 / 37.0 at
#      128 rows, CUPTI). Predicted 38-40 us fp32 if more CTAs in different phases is what the
#      one-CTA designs lost; slower if the 16-way exchange costs more than the overlap buys.
#   2. EMBER_DECODE_QK_SPLIT=1: S = Q K^T in four independent MMA chains a warp instead of two
#      (session 16's ncu at 256 x 1024 64/8: 1.58 of 4.61 cycles an instruction are fixed-latency
#      waits; FlashInfer's warps wait on memory instead). Its decode GPU tests, then the probe.
#      Predicted 256 x 1024 277 -> 268-274 us if the QK chain is on the critical path.
#      With it, EMBER_DECODE_ONEBAR=1 (one CTA barrier a tile instead of two), alone and both:
#      predicted within 1 % alone (ncu: 0.24 barrier cycles an instruction), more with QK_SPLIT
#      if the warps' chains then overlap across the barrier.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next43.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
G=-DEMBER_SOFTMAX_GRID_C=16
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
EMBER_EXTRA_CUDA_FLAGS=$G tests grid16 120 tests/ops/test_sampling.py -x
step 60 ab && EMBER_EXTRA_CUDA_FLAGS=$G bench grid16 60 $S
step 60 ab && bench base 60 $S
step 30 ab2 && EMBER_EXTRA_CUDA_FLAGS=$G bench grid16b 30 softmax --backends ember --shapes 128x128256 --dtypes fp32
step 30 ab2 && bench base2 30 softmax --backends ember --shapes 128x128256 --dtypes fp32
step 200 qks && EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_QK_SPLIT=1 -DEMBER_DECODE_ONEBAR=1" tests qks1b 200 tests/ops/test_decode.py -x
# (g8 cases first: one module a variant; each build is ~10-15 s on the H200 host)
step 120 probe && timeout 120 python3 tools/decode_probe.py --variants base,qks,onebar,qks1b --cases u256,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
step 90 probe2 && timeout 90 python3 tools/decode_probe.py --variants base,qks1b --cases u64,fp8 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"

#!/usr/bin/env bash
# Session 15's last H200 call (device tool, `.whl` carried; ~230 s of device time left, so a
# short one): EMBER_SOFTMAX_PIPE=1 (softmax_pipe_kernel: one CTA an SM, two rows staggered so
# that a row's exchange overlaps the next row's staging; softmax.cuh). Predicted at 128 x 128 256
# fp32: 40.8 -> 36-38 us if the per-round chain is what limits (bf16 37.3 -> 33-35); no gain if
# 16 warps an SM cannot keep the loads in flight.
#   1. its grid-touching softmax tests (graph replay, two streams, workspace contents, 200 rows)
#   2. the A/B against the default, interleaved
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next35.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 200 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
P=-DEMBER_SOFTMAX_PIPE=1
EMBER_EXTRA_CUDA_FLAGS=$P tests pipe 60 tests/ops/test_sampling.py -x -k "grid or graph or streams or many_rows or off_the or matches"
step 40 pipe && EMBER_EXTRA_CUDA_FLAGS=$P bench pipe 40 softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16
step 40 base && bench base 40 softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16
step 30 pipe2 && EMBER_EXTRA_CUDA_FLAGS=$P bench pipe2 30 softmax --backends ember --shapes 128x128256 --dtypes fp32,bf16
echo "== done at ${SECONDS}s"

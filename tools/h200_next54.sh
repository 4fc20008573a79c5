#!/usr/bin/env bash
# Session 18, second call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next54.sh
# h200_next53.sh's KV2 rows disagreed on an H100: the probe (graph replay) tied, 368.0 against
# 368.1 µs, the harness (CUPTI, separate processes) lost, 398.4 against 369.1. Here the harness
# runs base and KV2 twice, interleaved, at 256 x 1024 and 64 x 4096, then FlashInfer's
# tensor-core path in the same call, so the rows settle which number stands on this device.
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
S="decode --backends ember --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti"
for r in 1 2; do
  step 60 base$r && bench base$r 60 $S
  step 60 kv2$r && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 bench kv2_$r 60 $S
done
step 90 fi && bench fi 90 decode --backends flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti
echo "== done at ${SECONDS}s"

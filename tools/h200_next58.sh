#!/usr/bin/env bash
# Written in session 19 for the next H200 call (device tool, `.whl` carried; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next58.sh
# Session 19 ran only on H100s. On an H200 this call (1) measures softmax at HEAD (16-bit logits
# now take softmax_reg_kernel) against EMBER_SOFTMAX_REG=0 and the peers, for issue 5's table;
# (2) settles session 18's KV2 decode disagreement with interleaved harness rows beside
# FlashInfer's tensor-core path (h200_next54.sh); (3) runs tests/ops in the time left.
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
step 40 sm && bench softmax 40 $S
step 40 sm0 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_REG=0 bench softmax_reg0 40 $S
step 100 peers && bench peers 100 softmax --backends torch_compile,flashinfer --shapes 128x128256 --dtypes fp32,bf16
if [[ "$GPU" == *H200* ]]; then
  D="decode --backends ember --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti"
  step 50 kvb && bench kvbase 50 $D
  step 50 kv2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 bench kv2 50 $D
  step 90 fi && bench fi 90 decode --backends flashinfer[tensor_cores] --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --dtypes bf16 --timing cupti
fi
step 120 suite && tests ops $((585 - SECONDS)) tests/ops
echo "== done at ${SECONDS}s"

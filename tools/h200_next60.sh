#!/usr/bin/env bash
# Session 20 (device tool, `.whl` carried; timeout_s 600):
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next60.sh
# (1) tools/release_probe.cu modes 0-3 (mode 3: does a release wait on other warps' loads?);
# then, on an H200 only (an H100 stops here, PROBE_ONLY=1 stops anywhere): (2) softmax at HEAD
# against EMBER_SOFTMAX_REG=0 and the peers, for issue 5's table; (3) the KV2 decode rows beside
# FlashInfer's tensor-core path (both from h200_lib.sh); (4) tests/ops in the time left.
# (Supersedes h200_next58.sh, written in session 19 and never run: the same rows.)
source tools/h200_lib.sh  # wheels, environment, bench, tests, step, the H200 rows
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
if [ "${SKIP_PROBE:-0}" != 1 ]; then
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a tools/release_probe.cu -o /tmp/rp && timeout 60 /tmp/rp | tee $OUT/release_probe.txt
fi
if [[ "$GPU" != *H200* || "${PROBE_ONLY:-0}" = 1 ]]; then echo "== not an H200: stopped"; exit 0; fi
python3 -m ember.bench ceilings -q > /dev/null 2>&1
S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
step 60 sm && bench softmax 60 $S
softmax_peer_rows 60 $S
kv2_rows
step 120 suite && tests ops $((585 - SECONDS)) tests/ops
echo "== done at ${SECONDS}s"

#!/usr/bin/env bash
# Session 24 (device tool, `.whl` and `.snap` carried; any Hopper card): decode_tc_kernel's loop
# diet — the online softmax on the real query row only (rows 8-15 of the MMA block are padding),
# 2^x by one MUFU, the soft cap and the mask behind uniform branches (the mask on a unit's last
# tile only), the O rescale only when a max grew, cvt reading both halves of a register, 32-bit
# in-page addressing, the row sum reduced once: 674 -> 434 SASS instructions a warp a tile on the
# common path (fp8 d128), 735 -> 503 (bf16 d128; tools/sass_loop.py). The decode GPU tests first, then harness rows (CUPTI) against
# FlashInfer's tensor-core path, then the probe against session 23's header (`b23`, `.snap`).
# Unrun in session 24 (every start refused); session 25 ran it at `f6fed42` (H100, rows in
# docs/perf/h100-2026-12-07-s25a.jsonl), where the tree's header is `9ee245d`'s again.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next67.sh   (carry .whl, .snap)
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
tests decode 200 tests/ops/test_decode.py
SH8="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --timing cupti"
step 70 h8 && bench fp8 70 decode --backends ember,flashinfer[tensor_cores] $SH8
step 30 h8s && bench fp8skew 30 decode --backends ember,flashinfer[tensor_cores] $SH8 --lengths pareto
U16="64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16"
step 90 h16 && bench bf16 90 decode --backends ember,flashinfer[tensor_cores] --shapes $U16 --dtypes bf16 --timing cupti
step 120 probe && timeout 120 python3 tools/decode_probe.py --variants base,b23,v1 --cases fp8,fp8skew,u64,u256 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
echo "== done at ${SECONDS}s"

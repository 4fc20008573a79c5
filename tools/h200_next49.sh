#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 300). Diagnostic.
# Ember streams 4.35 TB/s at 64 x 4096 32/8 (G = 4) and 3.85 at 256 x 1024 64/8 (G = 8), the
# same bytes and kv heads; a persistent kernel (long streams a CTA) did not change 256 x 1024,
# so is it the group size? Each shape with the other G, ember (probe) and FlashInfer (harness).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next49.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
timeout 120 python3 tools/decode_probe.py --variants base --cases u256,u256g4,u64,u64g8 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
bench g 150 decode --backends ember,flashinfer --shapes 256x1024x32x8x128x16,64x4096x64x8x128x16
echo "== done at ${SECONDS}s"

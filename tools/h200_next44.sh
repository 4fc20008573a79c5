#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 600).
# EMBER_DECODE_PERSIST=1 (decode_tc_persist_kernel, 16-bit K/V): a CTA per resident slot and
# kv head walks its units as one stream of tiles, the next unit's row, pages, query and first
# tiles in flight during this one's last tiles and combine. Its decode GPU tests, then the
# probe against the default. Predicted (a + b x tokens a wave: ember a ~2.7 us, FlashInfer
# ~0.2): 256 x 1024 64/8 277 -> 262-268 us, 128 x 2048 133 -> 131-132, 64 x 4096 246.7 ->
# 245-246; one-wave cases (small, page 1, Pareto) unchanged (one unit a CTA either way).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next44.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_PERSIST=1 tests persist 200 tests/ops/test_decode.py -x
step 150 probe && timeout 150 python3 tools/decode_probe.py --variants base,persist --cases u256,u128,u64 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
step 120 probe2 && timeout 120 python3 tools/decode_probe.py --variants base,persist --cases small,page1,skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"

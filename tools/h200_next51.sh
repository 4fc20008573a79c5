#!/usr/bin/env bash
# Not run in session 17 (device time spent); for session 18 (device tool, `.whl` carried; output
# under $OUT; timeout_s 600). Diagnostic:
# at G = 8 the extra warp samples are all in the combine (ncu, h200_next46 / next50), matching the
# 3.1 % G = 8 costs at 256 x 1024, yet the rewritten combine (COMBINE2) measured no change at
# G = 8. Both G with and without it, in one probe, with decode_tc.cuh as at 038d343 (the
# session's last switches, restored into this copy only).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next51.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 585 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
cp ember/csrc/include/ember/decode_tc.cuh /tmp/tc_head.cuh; cp tools/decode_probe.py /tmp/probe_head.py
git show 038d343:ember/csrc/include/ember/decode_tc.cuh > ember/csrc/include/ember/decode_tc.cuh
sed -i 's|^VARIANTS: dict\[str, str\] = {  # name -> extra -D flags|&\n    "comb": "-DEMBER_DECODE_COMBINE2=1",|' tools/decode_probe.py
timeout 150 python3 tools/decode_probe.py --variants base,comb --cases u256,u256g4 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
# Then 2 stages at 2 CTAs an SM (s2b; session 15's s2 was 3 CTAs an SM): FlashInfer keeps one
# 32 KB K or V tile in flight a CTA (single-buffered, page numbers read just before each copy)
# and streams faster; ember keeps two 32 KB tiles. And EMBER_DECODE_KV2=1 (kv2: FlashInfer's
# pipeline shape, written in session 17, not yet run: its decode GPU tests first). On the tree
# as committed (decode_tc.cuh back).
cp /tmp/tc_head.cuh ember/csrc/include/ember/decode_tc.cuh; cp /tmp/probe_head.py tools/decode_probe.py
step 200 kv2 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_KV2=1 tests kv2 200 tests/ops/test_decode.py -x
step 150 probe2 && timeout 150 python3 tools/decode_probe.py --variants base,s2b,kv2 --cases u256,u64 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"

#!/usr/bin/env bash
# Not run in session 17 (device time spent); for session 18 (device tool, `.whl` carried; output
# under $OUT; timeout_s 400). Diagnostic:
# at G = 8 the extra warp samples are all in the combine (ncu, h200_next46 / next50), matching the
# 3.1 % G = 8 costs at 256 x 1024, yet the rewritten combine (COMBINE2) measured no change at
# G = 8. Both G with and without it, in one probe, with decode_tc.cuh as at 038d343 (the
# session's last switches, restored into this copy only).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next51.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
cp ember/csrc/include/ember/decode_tc.cuh /tmp/tc_head.cuh; cp tools/decode_probe.py /tmp/probe_head.py
git show 038d343:ember/csrc/include/ember/decode_tc.cuh > ember/csrc/include/ember/decode_tc.cuh
sed -i 's|^VARIANTS: dict\[str, str\] = {  # name -> extra -D flags|&\n    "comb": "-DEMBER_DECODE_COMBINE2=1",|' tools/decode_probe.py
timeout 150 python3 tools/decode_probe.py --variants base,comb --cases u256,u256g4 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
# Then 2 stages at 2 CTAs an SM (s2b; session 15's s2 was 3 CTAs an SM): FlashInfer keeps one
# 32 KB K or V tile in flight a CTA (single-buffered, page numbers read just before each copy)
# and streams faster; ember keeps two 32 KB tiles. On the tree as committed (decode_tc.cuh back).
cp /tmp/tc_head.cuh ember/csrc/include/ember/decode_tc.cuh; cp /tmp/probe_head.py tools/decode_probe.py
timeout 150 python3 tools/decode_probe.py --variants base,s2b --cases u256,u128,u64 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"

#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 400).
# PG_LEAD 2/3 and COMBINE2 measured the same as the default everywhere (h200_next47.sh): what
# ncu's samples point at in the warps is not what sets the time. Left: the memory side. The K/V
# copies with an L2 prefetch hint (EMBER_DECODE_L2PF=128 / 256: cp.async ... .L2::128B, the form
# FlashInfer's loads take), so that L2 asks DRAM for a row's lines at once. Probe only (the
# probe checks every variant's output against fp64 first).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next48.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
step() { if [ $((SECONDS + $1)) -gt 380 ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
step 150 probe && timeout 150 python3 tools/decode_probe.py --variants base,pf128,pf256 --cases u256,u128 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
step 150 probe2 && timeout 150 python3 tools/decode_probe.py --variants base,pf128,pf256 --cases u64,fp8 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe2.txt
echo "== done at ${SECONDS}s"

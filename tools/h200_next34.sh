#!/usr/bin/env bash
# Session 15's third H200 call (device tool, `.whl` carried with cupti-python and pyelftools;
# timeout_s 600): the softmax tests and rows at HEAD (the grid kernel's counts zeroed by a
# memset in the binding), the per-activity split of a softmax call (kernel against memset:
# CUPTI summed 40.6 us, ncu timed the kernel alone at 37.2), the 2-stage / 3-CTAs-an-SM decode
# variant on the uniform shapes (256 x 1024 64/8 is at 0.94x FlashInfer's tensor-core path),
# then the whole GPU suite, interrupted (SIGINT: pytest prints its summary) at 585 s.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next34.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests softmax 90 tests/ops/test_sampling.py
bench softmax 45 softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16
timeout 40 python3 tools/softmax_breakdown.py 2>&1 | tail -6
timeout 110 python3 tools/decode_probe.py --variants base,s2 --cases u256,u128,u64 --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe.txt
left=$((585 - SECONDS)); echo "== suite from ${SECONDS}s, ${left}s"
timeout -s INT $left python3 -m pytest -q tests/ops tests/jit tests/unit -p no:cacheprovider --durations=5 > $OUT/tests_all.txt 2>&1
echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests_all.txt | head -30
grep -E "^E " $OUT/tests_all.txt | head -20
echo "== done at ${SECONDS}s"

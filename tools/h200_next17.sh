#!/usr/bin/env bash
# Session 11's last H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 540):
# the whole GPU suite at HEAD with filter_stream_kernel the default (48 rows or more), then
# top-p from probs at 128 x 128 256 against FlashInfer in the same run.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next17.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
timeout 400 python3 -m pytest -q tests -p no:cacheprovider --durations=10 > $OUT/tests_all.txt 2>&1
echo "suite rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests_all.txt | head -30
grep -E "^E " $OUT/tests_all.txt | head -20
python3 -m ember.bench ceilings -q > /dev/null 2>&1
bench top_p 100 top_p_sampling_from_probs --backends ember,flashinfer --shapes 128x128256

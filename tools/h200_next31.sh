#!/usr/bin/env bash
# Session 14's third H200 call (device tool, `.whl` carried; timeout_s 600): the whole GPU suite
# at the commit that made softmax_grid_kernel the default, interrupted (SIGINT, so pytest still
# prints its summary) at 510 s; the kernel test files first.
source tools/h200_lib.sh  # wheels, environment
timeout -s INT 510 python3 -m pytest -q tests/ops tests/jit tests/unit -p no:cacheprovider --durations=10 > $OUT/tests_all.txt 2>&1
echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^[0-9.]+s (call|setup)" $OUT/tests_all.txt | head -40
grep -E "^E " $OUT/tests_all.txt | head -30

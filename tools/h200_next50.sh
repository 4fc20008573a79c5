#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 200). Diagnostic:
# ncu's per-instruction warp samples of the decode kernel at 256 x 1024 32/8 (G = 4), to set
# beside h200_next46.sh's 64/8 (G = 8): G = 8 costs ~1.06 us a unit (h200_next49.sh).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next50.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
NCU="ncu --clock-control none --launch-skip 5 --launch-count 1 --kernel-name regex:decode_tc --section SourceCounters --section WarpStateStats"
c=256x1024x32x8x128x16
timeout 150 $NCU -o $OUT/r_$c python3 -m ember.bench decode --shapes $c --timing cuda_event -q --backends ember > $OUT/ncu_$c.txt 2>&1
echo "ncu $c rc $?"
timeout 40 ncu -i $OUT/r_$c.ncu-rep --page source --csv --print-source sass > $OUT/sass_$c.csv 2> $OUT/sass_$c.err
echo "source page rc $? $(wc -l < $OUT/sass_$c.csv) lines"
grep -E "Duration|Warp Cycles Per Issued" $OUT/ncu_$c.txt | head
echo "== done at ${SECONDS}s"

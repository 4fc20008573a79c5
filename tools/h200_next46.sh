#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 400): where in the
# decode kernel the time goes, per SASS instruction (ncu's source page: warp-state samples an
# instruction), at 256 x 1024 and 128 x 2048 (the same <bf16, bf16, 128, 8> kernel, 1 024 vs
# 2 048 tokens a unit). Measured this session: ember streams 3.84 TB/s at 248-264 x 1024 against
# FlashInfer's 4.02-4.07 and is not flat across 248/256/264 requests, so the gap is not the last
# partial wave; and the persistent variant (no pipeline fill/drain between units) measured the
# same as the default. A fit of time = bytes / R + units a slot x c gives ember c ~5 us a unit,
# FlashInfer ~2.8. Diagnostic only.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next46.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
NCU="ncu --clock-control none --launch-skip 5 --launch-count 1 --kernel-name regex:decode_tc --section SourceCounters --section WarpStateStats"
for c in 256x1024x64x8x128x16 128x2048x32x4x128x16; do
  timeout 150 $NCU -o $OUT/r_$c python3 -m ember.bench decode --shapes $c --timing cuda_event -q --backends ember > $OUT/ncu_$c.txt 2>&1
  echo "ncu $c rc $?"
  timeout 60 ncu -i $OUT/r_$c.ncu-rep --page source --csv --print-source sass > $OUT/sass_$c.csv 2> $OUT/sass_$c.err
  echo "source page rc $? $(wc -l < $OUT/sass_$c.csv) lines"; head -c 600 $OUT/sass_$c.csv; head -5 $OUT/sass_$c.err
done
echo "== done at ${SECONDS}s"

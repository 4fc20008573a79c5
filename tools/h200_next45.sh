#!/usr/bin/env bash
# For session 17 (device tool, `.whl` carried; output under $OUT; timeout_s 600).
# Is the 256 x 1024 64/8 gap the last partial wave? 2 048 CTAs on 264 slots are 7.76 waves.
# ncu (session 16) has ember's warps bound by their own chains and FlashInfer's by memory, so a
# FlashInfer CTA can speed up when its SM's other slot is idle and an ember CTA cannot: if so,
# ember's time is ~flat from 248 to 264 requests (all 8 waves) while FlashInfer's grows with
# the bytes (~253 -> 261 -> 269 us), and the two meet at 264 (exactly 8 waves).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next45.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
bench waves 300 decode --backends ember,flashinfer --shapes 248x1024x64x8x128x16,256x1024x64x8x128x16,264x1024x64x8x128x16
echo "== done at ${SECONDS}s"

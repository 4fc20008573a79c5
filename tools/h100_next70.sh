#!/usr/bin/env bash
# Written in session 26 for the next call (device tool, `.whl` carried; any Hopper card; timeout
# 600): EMBER_DECODE_TMMA=2 is the default since e266af8 (tokens as the MMA's M for fp8 KV only).
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next70.sh
# (1) the decode GPU tests at the default (never run: its cubins are the SASS of builds that
# passed, `tools/sass_loop.py --same-as`); (2) on an H200 only, issue 4's table first (both
# FlashInfer paths), TMMA for 16-bit KV beside it, and the plan host time; (3) the tests under
# EMBER_DECODE_ADDR=1 (K/V addresses as byte multiply-adds, written in session 26, unrun) alone
# and with TMMA for every KV dtype; (4) the probe: the default against TMMA off (`tm0`), on for
# every KV dtype (`tmma`), `addr`, `addrtm`, on the L2-resident cases that fill the machine
# (`hot*s`: the issue rate), the latency-bound `hot8`, and fp8 64 x 4096 / bf16 256 x 1024 cold;
# (5) the fp8 row beside FlashInfer's tensor-core decode. On an H200 the steps past ~585 s are
# skipped (`step`): run `SKIP_TABLE=1` in a second call for them.
source tools/h200_lib.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
tests default 130 tests/ops/test_decode.py
if [[ "$GPU" == *H200* && "${SKIP_TABLE:-0}" != 1 ]]; then
  ALL="--backends ember,flashinfer --timing cupti --dtypes bf16"
  step 120 uni && bench uniform 120 decode --shapes 64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16 $ALL
  step 60 skew && bench pareto 60 decode --shapes 64x4096x32x8x128x16 --lengths pareto $ALL
  step 60 small && bench small_page1 60 decode --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1 $ALL
  step 60 fp8t && bench fp8_table 60 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 $ALL
  # TMMA for 16-bit KV too: the G = 8 shape trails FlashInfer here (0.940x in session 15)
  step 45 tm16 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_TMMA=1 bench tmma16 45 decode --shapes 256x1024x64x8x128x16,64x4096x32x8x128x16 --backends ember --timing cupti --dtypes bf16
  step 40 plan && timeout 40 python3 tools/decode_plan_time.py --peers cuda_cores 2>&1 | tee -a $OUT/tables.md
fi
step 80 addr && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_ADDR=1 tests addr 80 tests/ops/test_decode.py
step 80 tmaddr && EMBER_EXTRA_CUDA_FLAGS="-DEMBER_DECODE_ADDR=1 -DEMBER_DECODE_TMMA=1" tests tmaddr 80 tests/ops/test_decode.py
step 150 probe && timeout 150 python3 tools/decode_probe.py --variants base,tm0,tmma,addr,addrtm --cases hot8s,hot16s,hot16g8s,hot8,fp8,u256 --rounds 3 2>&1 | grep -v "^built " | tee $OUT/probe.txt
step 60 r8 && bench fp8 60 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 --backends ember,flashinfer[tensor_cores] --timing cupti
echo "== done at ${SECONDS}s"

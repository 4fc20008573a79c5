#!/usr/bin/env bash
# Written in session 27 for its second call (device tool, `.whl` carried; any Hopper card;
# timeout 600): issue 4's whole acceptance table in one run, on whichever card comes —
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next71.sh
# (1) the cold compile of one decode module (a fresh cache of its own) and FlashInfer's first
# plan + run on both paths; (2) the decode GPU tests at the default; (3) the table: the three
# uniform shapes, Pareto, B=4 x 32 768, page 1, fp8 KV, each beside both FlashInfer paths
# (`--backends ember,flashinfer`); (4) the same shapes under EMBER_DECODE_ADDR=1 (the address
# diet: its tests passed on an H100 in session 27's first call, streaming tied, latency-bound
# cases -2 to -10 % but the L2-resident G = 8 case +3.5 %); (5) the probe on the G = 8 question
# (base against addr, 5 rounds); (6) plan() host time beside FlashInfer's two paths.
source tools/h200_lib.sh
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$GPU"
python3 -m ember.bench ceilings -q > /dev/null 2>&1
EMBER_CACHE_DIR=/tmp/ember-cold timeout 120 python3 - <<'PY' 2>&1 | tee $OUT/compile.txt
import time, torch
from ember.jit import build_and_load
from ember.ops.decode import decode_spec, planner_spec
t = time.perf_counter(); build_and_load(planner_spec()); print(f"ember planner (host): {time.perf_counter()-t:.2f} s")
t = time.perf_counter(); build_and_load(decode_spec("bf16", "bf16", 128, 4)); print(f"ember cold compile decode_bf16_bf16_d128_g4: {time.perf_counter()-t:.2f} s")
import flashinfer
for tc in (False, True):
    buf = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(buf, "NHD", use_tensor_cores=tc)
    ip = torch.tensor([0, 4], dtype=torch.int32); last = torch.tensor([16], dtype=torch.int32)
    idx = torch.arange(4, dtype=torch.int32, device="cuda")
    cache = torch.randn(4, 2, 16, 8, 128, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
    t = time.perf_counter(); w.plan(ip, idx, last, 32, 8, 128, 16, q_data_type=torch.bfloat16); w.run(q, cache); torch.cuda.synchronize()
    print(f"flashinfer cold decode (use_tensor_cores={tc}, plan + first run): {time.perf_counter()-t:.2f} s")
PY
tests default 60 tests/ops/test_decode.py
ALL="--backends ember,flashinfer --timing cupti --dtypes bf16"
U=64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16
step 120 uni && bench uniform 120 decode --shapes $U $ALL
step 60 skew && bench pareto 60 decode --shapes 64x4096x32x8x128x16 --lengths pareto $ALL
step 60 small && bench small_page1 60 decode --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1 $ALL
step 60 fp8t && bench fp8_table 60 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 $ALL
E="--backends ember --timing cupti --dtypes bf16"
step 45 au && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_ADDR=1 bench addr_uni 45 decode --shapes $U,4x32768x32x8x128x16,32x4096x32x8x128x1 $E
step 30 a8 && EMBER_EXTRA_CUDA_FLAGS=-DEMBER_DECODE_ADDR=1 bench addr_fp8 30 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 $E
step 90 probe && timeout 90 python3 tools/decode_probe.py --variants base,addr --cases hot16g8s,hot16g8,hot16s,u64g8,u256 --rounds 5 2>&1 | grep -v "^built " | tee $OUT/probe.txt
step 40 plan && timeout 40 python3 tools/decode_plan_time.py 2>&1 | tee -a $OUT/tables.md
echo "== done at ${SECONDS}s"

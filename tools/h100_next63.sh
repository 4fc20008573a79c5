#!/usr/bin/env bash
# Session 21 (device tool, `.whl` carried; any Hopper card: the fp8 kernel is below both cards'
# copy limits): 128-token fp8 tiles, 32 tokens a warp (EMBER_DECODE_FP8_WT=32), against the
# default; their fp8 decode tests first; then where the default's warps wait (stall reasons a
# issued instruction and ncu's source page, as h100_next62.sh, which never got a machine).
# On an H200 it also runs h200_next60.sh's softmax and KV2 rows before the profile.
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h100_next63.sh
source tools/h200_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m ember.bench ceilings -q > /dev/null 2>&1
A="-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=2"
B="-DEMBER_DECODE_FP8_WT=32 -DEMBER_DECODE_STAGES8=3 -DEMBER_DECODE_MINB=2"
C="$B -DEMBER_DECODE_FP8_CONV=1"
K="-k fp8 tests/ops/test_decode.py"
tests fp8_default 60 -k tile_edges tests/ops/test_decode.py
EMBER_EXTRA_CUDA_FLAGS="$A" tests fp8_f32a 100 $K
EMBER_EXTRA_CUDA_FLAGS="$C" tests fp8_f32bc 100 $K
step 150 probe && timeout 150 python3 tools/decode_probe.py --variants base,f32a,f32b,cv,f32bc --cases fp8,fp8skew --rounds 3 2>&1 | grep -v "^built" | tee $OUT/probe_fp8.txt
SH="--shapes 64x4096x32x8x128x16 --kv-dtype e4m3"
step 40 h_base && bench fp8_base 40 decode --backends ember $SH --timing cupti
step 40 h_f32b && EMBER_EXTRA_CUDA_FLAGS="$B" bench fp8_f32b 40 decode --backends ember $SH --timing cupti
step 40 h_f32bc && EMBER_EXTRA_CUDA_FLAGS="$C" bench fp8_f32bc 40 decode --backends ember $SH --timing cupti
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ "$GPU" == *H200* ]]; then  # the rows only an H200 can give (h200_next60.sh's)
  S="softmax --backends ember --shapes 128x128256,64x128256 --dtypes fp32,bf16"
  step 60 sm && bench softmax 60 $S
  softmax_peer_rows 60 $S
  kv2_rows
fi
STALLS=$(ncu --query-metrics 2>/dev/null | grep -oE "^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active" | sort -u | sed 's/$/.ratio/' | paste -sd, -)
step 150 ncu && timeout 150 ncu --clock-control none --launch-skip 3 --launch-count 1 --kernel-name regex:decode_tc --section SourceCounters --section WarpStateStats --metrics $STALLS -o $OUT/r_fp8 python3 -m ember.bench decode --backends ember $SH --timing cuda_event -q > $OUT/ncu_fp8.txt 2>&1
echo "ncu rc $?"
[ -f $OUT/r_fp8.ncu-rep ] && ncu -i $OUT/r_fp8.ncu-rep --page raw --csv 2>/dev/null | python3 -c "
import csv,sys
rows=list(csv.reader(sys.stdin)); h,v=rows[0],rows[-1]
def num(x):
    try: return float(x.replace(',',''))
    except ValueError: return -1
for k,x in sorted(zip(h,v), key=lambda t: -num(t[1])):
    if 'issue_stalled' in k and num(x)>0.02: print(f'{k:90s} {x}')
" | tee $OUT/stalls.txt
[ -f $OUT/r_fp8.ncu-rep ] && step 60 top && timeout 60 python3 tools/ncu_source_top.py $OUT/r_fp8.ncu-rep 40 --csv-out $OUT/sass_fp8.csv > $OUT/top_fp8.txt 2>&1; head -90 $OUT/top_fp8.txt
echo "== done at ${SECONDS}s"

#!/usr/bin/env bash
# Session 12's third H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600).
# After h200_next19.sh (065d541: top-p 51.58 us, the marked kernel 2.8-3.5 us; the stream's
# profile: tile loop 59 % of stall samples, top-p select 19 %, its cluster barrier the largest
# single stall outside the loop). Now radix_select at C = 1 takes block barriers, and the A/B:
#   EMBER_STREAM_LEAN bits (1: REDUX running maximum, 2: sign-bit OR) x EMBER_STREAM_CHAINS
#   (ptxas: 3 = 562 loop instructions and 3 local accesses a tile, 0 + 2 chains 618 and 1,
#   0 + 1 chain 617 and none); EMBER_FILTER_MARKED = 8 (a grid of rows / 8 clusters).
#   1. the sampling GPU tests (default: LEAN 3, 1 chain)
#   2. top-p from probs at 128 x 128 256 under each build; top-k, top-k + top-p (default)
#   3. ncu: kernel durations (default) and the stream's source counters by region
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next20.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests sampling 240 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
S=128x128256,64x128256
bench top_p 60 top_p_sampling_from_probs --backends ember --shapes $S
for f in "-DEMBER_STREAM_LEAN=0 -DEMBER_STREAM_CHAINS=2" "-DEMBER_STREAM_LEAN=0" "-DEMBER_STREAM_LEAN=1" "-DEMBER_STREAM_LEAN=2" "-DEMBER_FILTER_MARKED=8"; do
  EMBER_EXTRA_CUDA_FLAGS="$f" bench "top_p$(echo $f | tr -d ' =-' | sed 's/DEMBER_//g')" 60 top_p_sampling_from_probs --backends ember --shapes $S
done
for op in top_k_sampling_from_probs top_k_top_p_sampling_from_probs; do
  bench $op 40 $op --backends ember --shapes 128x128256
done
TOP_P="import torch, ember
p = torch.softmax(4 * torch.randn(128, 128256, device='cuda'), -1)
for _ in range(4): ember.top_p_sampling_from_probs(p, 0.9, seed=1)
torch.cuda.synchronize()"
timeout 90 ncu --clock-control none --launch-skip 4 --launch-count 4 --metrics gpu__time_duration.sum,launch__grid_size python3 -c "$TOP_P" > $OUT/ncu_dur.txt 2>&1
echo "== ncu durations rc $?"; grep -E "filter_|gpu__time|grid_size" $OUT/ncu_dur.txt | sed -E 's/\(FilterParams\).*//' | head -12
timeout 150 ncu --clock-control none --kernel-name regex:filter_stream --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats -f -o /tmp/src_rep python3 -c "$TOP_P" > $OUT/ncu_src.txt 2>&1
echo "== ncu source counters, stream kernel rc $?"; tail -1 $OUT/ncu_src.txt
# regions: tile loop, row reduction, top-k select, top-p select, philox + kept copy, draw, tail
python3 tools/ncu_source_top.py /tmp/src_rep.ncu-rep 12 --regions 0x830,0x2b50,0x3670,0x6d00,0xb800,0xd380,0xdf10 --csv-out $OUT/ncu_src.csv | tee $OUT/ncu_src_top.txt

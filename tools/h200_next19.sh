#!/usr/bin/env bash
# Session 12's second H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600).
# The first (h200_next18.sh, 095edb9) found both of its changes slower: the lane-read tile
# maximum made ptxas spill in the stream's loop (54.2 against 49.1 us), and
# filter_marked_kernel spent 12 us a launch on local-memory stores ptxas hoisted to its start.
# Now: the old tile maximum; the marked kernel checks its flags before the row loop; the draw
# walks only the kept candidates (-DEMBER_STREAM_KEPT=0: the whole list).
#   1. the sampling GPU tests
#   2. top-p from probs at 128 / 64 rows: default, KEPT=0; top-k and top-k + top-p from probs
#      (predicted: top-p ~50-51 us: stream ~49, marked kernel ~1.5-2)
#   3. ncu: each kernel's duration in a top-p call; the stream kernel's source counters and
#      warp-stall samples split into regions, the CSV kept
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next19.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests sampling 240 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
bench top_p 60 top_p_sampling_from_probs --backends ember --shapes 128x128256,64x128256
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_STREAM_KEPT=0 bench top_p_k0 60 top_p_sampling_from_probs --backends ember --shapes 128x128256,64x128256
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
python3 tools/ncu_source_top.py /tmp/src_rep.ncu-rep 30 --regions 0x780,0x2e20,0x3900,0x70c0,0xbe00,0xd9b0,0xe670 --csv-out $OUT/ncu_src.csv | tee $OUT/ncu_src_top.txt

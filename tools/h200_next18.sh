#!/usr/bin/env bash
# Session 12's first H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   1. the sampling GPU tests at HEAD: filter_kernel's body is now filter_row (SASS moved), the
#      stream's fallback is filter_marked_kernel (a grid of resident clusters over marked rows)
#   2. top-p from probs at 128 x 128 256: default, -DEMBER_FILTER_MARKED=0 (the old fallback);
#      top-k and top-k + top-p from probs (predicted: top-p 53.05 -> ~50: the fallback launch
#      3.9 -> ~1.5-2 us, the stream's tile maximum ~3 instructions a value fewer)
#   3. ncu: each kernel's duration in a top-p call (stream vs fallback, both builds), then the
#      stream kernel's source counters with warp-stall sampling, split into the tile loop, the
#      row reduction, the top-k select, the top-p select and the draw (addresses from cuobjdump
#      of the same build on the CPU machine)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next18.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests sampling 240 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
bench top_p 60 top_p_sampling_from_probs --backends ember --shapes 128x128256,64x128256
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_MARKED=0 bench top_p_m0 60 top_p_sampling_from_probs --backends ember --shapes 128x128256,64x128256
for op in top_k_sampling_from_probs top_k_top_p_sampling_from_probs; do
  bench $op 40 $op --backends ember --shapes 128x128256
done
TOP_P="import torch, ember
p = torch.softmax(4 * torch.randn(128, 128256, device='cuda'), -1)
for _ in range(4): ember.top_p_sampling_from_probs(p, 0.9, seed=1)
torch.cuda.synchronize()"
for flags in "" -DEMBER_FILTER_MARKED=0; do
  EMBER_EXTRA_CUDA_FLAGS="$flags" timeout 90 ncu --clock-control none --launch-skip 4 --launch-count 4 --metrics gpu__time_duration.sum,launch__grid_size python3 -c "$TOP_P" > $OUT/ncu_dur$flags.txt 2>&1
  echo "== ncu durations {$flags} rc $?"; grep -E "filter_|gpu__time|grid_size" $OUT/ncu_dur$flags.txt | sed -E 's/\(FilterParams\).*//' | head -12
done
timeout 150 ncu --clock-control none --kernel-name regex:filter_stream --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats -f -o /tmp/src_rep python3 -c "$TOP_P" > $OUT/ncu_src.txt 2>&1
echo "== ncu source counters, stream kernel rc $?"; tail -1 $OUT/ncu_src.txt
python3 tools/ncu_source_top.py /tmp/src_rep.ncu-rep 30 --regions 0x7f0,0x2cd0,0x3260,0x7070,0xbe00,0xc5a0,0xd1d0 | tee $OUT/ncu_src_top.txt

#!/usr/bin/env bash
# The next session's H200 calls (device tool, `.whl` carried; output under $OUT; timeout_s 600;
# fire each as soon as the previous returns, while the machine is warm):
#   (default)  GPU tests of the sampling files at HEAD, with the online softmax
#              (-DEMBER_SOFTMAX_ONLINE=1), and with the filters' candidates: lean passes
#              (-DEMBER_FILTER_LEAN=1), two-phase level 0 (-DEMBER_FILTER_SPLIT0=1) and both; the
#              decode fp8 tests (decode_tc.cuh's rename); the filters' A/B (4 builds, top-p and
#              top-k+top-p from logits); the softmax A/B (default / online / online + one-row
#              kernel, fp32 and bf16, 4 shapes) (~480 s in all)
#   PROFILE=1  Nsight Compute: where the top-p filter kernel's warp instructions go (source
#              counters ranked by tools/ncu_source_top.py, default and lean + split builds: the
#              ncu total, 70.6 M, is ~3x what the per-pass SASS model counts; notes/act.md has
#              the divergence hypothesis), both softmax kernels, RoPE at 8192 tokens
#   PEERS=1    the peers' softmax and filter tables (torch.compile, FlashInfer; their compiles
#              take most of it: FlashInfer's sampling module ~53 s), and merge_states (issue 4)
#   SUITE=1    the whole GPU suite (430 s at 296deba)
# Activations' and RoPE's peer tables: tools/h200_issue5.sh act (not rerun since b2a2be8's
# FlashInfer run). Issue 4's full decode table: tools/h200_decode.sh (not rerun since ec96584).
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_next9.sh
source tools/h200_lib.sh  # wheels, environment, SUITE=1, bench, tests
ON=-DEMBER_SOFTMAX_ONLINE=1
LEAN=-DEMBER_FILTER_LEAN=1
SPLIT=-DEMBER_FILTER_SPLIT0=1
TOP_P="import torch, ember
p = torch.softmax(4 * torch.randn(128, 128256, device='cuda'), -1)
for _ in range(4): ember.top_p_sampling_from_probs(p, 0.9)
torch.cuda.synchronize()"
if [ "${PROFILE:-0}" = 1 ]; then
  for flags in "" "$LEAN $SPLIT"; do
    EMBER_EXTRA_CUDA_FLAGS="$flags" timeout 150 ncu --clock-control none --kernel-name regex:filter_kernel --launch-skip 2 --launch-count 1 --section SourceCounters -f -o /tmp/src_rep python3 -c "$TOP_P" > $OUT/ncu_src.txt 2>&1
    echo "== ncu source counters, top-p filter {$flags} rc $?"; tail -1 $OUT/ncu_src.txt
    python3 tools/ncu_source_top.py /tmp/src_rep.ncu-rep 40
  done
  M=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct
  for flags in "" "$ON"; do
    EMBER_EXTRA_CUDA_FLAGS="$flags" timeout 90 ncu --clock-control none --kernel-name regex:softmax --launch-skip 2 --launch-count 1 --metrics $M python3 -c "
import torch, ember
x = 4 * torch.randn(128, 128256, device='cuda')
for _ in range(4): ember.softmax(x, 0.7)
torch.cuda.synchronize()" > $OUT/ncu_softmax.txt 2>&1; echo "== ncu softmax {$flags} rc $?"; grep -E "softmax|gpu__time|inst_exec|issue_active|dram__|warps_active|grid_size|stalled" $OUT/ncu_softmax.txt | head -14
  done
  timeout 90 ncu --clock-control none --kernel-name regex:rope --launch-skip 2 --launch-count 1 --metrics $M,dram__bytes_read.sum,dram__bytes_write.sum python3 -c "
import torch, ember
q = torch.randn(8192, 32, 128, device='cuda', dtype=torch.bfloat16)
k = torch.randn(8192, 8, 128, device='cuda', dtype=torch.bfloat16)
pos = torch.randint(0, 8192, (8192,), device='cuda', dtype=torch.int32)
cache = torch.randn(8192, 128, device='cuda')
for _ in range(4): ember.apply_rope_with_cos_sin_cache_(q, k, pos, cache)
torch.cuda.synchronize()" > $OUT/ncu_rope.txt 2>&1; echo "== ncu RoPE 8192 tokens rc $?"; grep -E "rope|gpu__time|inst_exec|issue_active|dram__|warps_active|grid_size|stalled" $OUT/ncu_rope.txt | head -16
  exit 0
fi
if [ "${PEERS:-0}" = 1 ]; then
  bench softmax_peers 200 softmax --backends ember,torch,torch_compile,flashinfer --shapes 128x128256,32x151936
  bench top_p 240 top_p_sampling_from_probs --backends ember,torch,flashinfer
  bench topk_topp_logits 150 top_k_top_p_sampling_from_logits --backends ember,torch,torch_compile,flashinfer
  for op in top_k_sampling_from_probs min_p_sampling_from_probs top_k_top_p_sampling_from_probs top_k_renorm_probs top_p_renorm_probs top_k_mask_logits; do
    bench $op 60 $op --backends ember,flashinfer --shapes 128x128256
  done
  bench merge_states 120 merge_states --backends ember,flashinfer  # issue 4: v3 never timed against it
  exit 0
fi
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests sampling 120 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=$ON tests online 90 tests/ops/test_sampling.py
EMBER_EXTRA_CUDA_FLAGS=$LEAN tests lean 60 tests/ops/test_sampling_filters.py
EMBER_EXTRA_CUDA_FLAGS=$SPLIT tests split 60 tests/ops/test_sampling_filters.py
EMBER_EXTRA_CUDA_FLAGS="$LEAN $SPLIT" tests lean_split 60 tests/ops/test_sampling_filters.py
tests decode_fp8 90 tests/ops/test_decode.py -k fp8
echo "== filters A/B: lean passes, two-phase level 0, both"
for op in top_p_sampling_from_probs top_k_top_p_sampling_from_logits; do
  bench ${op} 40 $op --backends ember --shapes 128x128256,1x128256
  EMBER_EXTRA_CUDA_FLAGS=$LEAN bench ${op}_lean 30 $op --backends ember --shapes 128x128256
  EMBER_EXTRA_CUDA_FLAGS=$SPLIT bench ${op}_split 30 $op --backends ember --shapes 128x128256
  EMBER_EXTRA_CUDA_FLAGS="$LEAN $SPLIT" bench ${op}_lean_split 30 $op --backends ember --shapes 128x128256,1x128256
done
echo "== softmax A/B"
S=128x128256,512x32000,1x128256,32x151936
bench softmax 60 softmax --backends ember --shapes $S
EMBER_EXTRA_CUDA_FLAGS=$ON bench softmax_online 60 softmax --backends ember --shapes $S
EMBER_EXTRA_CUDA_FLAGS="$ON -DEMBER_SOFTMAX_PERSISTENT=0" bench softmax_online_onerow 60 softmax --backends ember --shapes 128x128256
bench softmax_bf16 60 softmax --backends ember --shapes 128x128256 --dtypes bf16
EMBER_EXTRA_CUDA_FLAGS=$ON bench softmax_online_bf16 60 softmax --backends ember --shapes 128x128256 --dtypes bf16

#!/usr/bin/env bash
# Session 12's fourth H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
# filter_stream_kernel from fp32 logits under top-k / min-p (the probs build now has no spills).
#   1. cold compile of sampling_fp32 (fresh cache; target <= 15 s), then the sampling GPU tests
#   2. same run against FlashInfer: top-p from probs, top-k + top-p from logits (and the
#      cluster kernel for it, -DEMBER_FILTER_STREAM=0); top-k and top-k + top-p from probs
#      (predicted: logits 136.7 -> ~50 us, probs top-p ~47-48 us)
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next21.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.sampling import sampling_spec
t = time.perf_counter(); build_and_load(sampling_spec('fp32')); print(f'cold compile sampling_fp32: {time.perf_counter() - t:.2f} s')" | tee $OUT/compile.txt
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests sampling 240 tests/ops/test_sampling_filters.py tests/ops/test_sampling.py
bench top_p 150 top_p_sampling_from_probs --backends ember,flashinfer --shapes 128x128256,64x128256
bench tktp_logits 120 top_k_top_p_sampling_from_logits --backends ember,flashinfer --shapes 128x128256,64x128256
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_FILTER_STREAM=0 bench tktp_logits_s0 60 top_k_top_p_sampling_from_logits --backends ember --shapes 128x128256,64x128256
for op in top_k_sampling_from_probs top_k_top_p_sampling_from_probs; do
  bench $op 40 $op --backends ember --shapes 128x128256
done

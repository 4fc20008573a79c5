#!/usr/bin/env bash
# Session 13's first H200 call (device tool, `.whl` carried; output under $OUT; timeout_s 600):
#   1. cold compile of sampling_fp32 with one unit a filter mode (15.99 s with two; target 15),
#      ninja's log of the unit times and the CPUs it had
#   2. softmax GPU tests (softmax_pair_kernel the default for 64+ rows of 65 537-131 072 fp32)
#   3. softmax at 128 / 64 / 256 x 128 256, fp32 and bf16, against torch.compile and FlashInfer,
#      and the same shapes with -DEMBER_SOFTMAX_PAIR=0 (the 8-CTA persistent clusters)
#      (predicted: 128 rows fp32 42.9 -> 35-37 us, >= 3.4 TB/s)
#   4. silu_and_mul 8192 x 2*14336 against torch.compile and Liger, once more
#   EMBER_BENCH_COMMIT=<this machine's short HEAD> bash tools/h200_next22.sh
source tools/h200_lib.sh  # wheels, environment, bench, tests
nproc
python3 -c "
import time; from ember.jit import build_and_load; from ember.ops.sampling import sampling_spec
t = time.perf_counter(); build_and_load(sampling_spec('fp32')); print(f'cold compile sampling_fp32: {time.perf_counter() - t:.2f} s')" | tee $OUT/compile.txt
cat $(find /tmp/ember-cache -path "*sampling_fp32*" -name .ninja_log) | tee -a $OUT/compile.txt
python3 -m ember.bench ceilings -q > /dev/null 2>&1  # the copy ceiling, cached for every row
tests softmax 150 tests/ops/test_sampling.py
S=128x128256,64x128256,256x128256
bench softmax 200 softmax --backends ember,torch_compile,flashinfer --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR=0 bench softmax_p0 60 softmax --backends ember --shapes $S --dtypes fp32,bf16
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_SOFTMAX_PAIR=0 tests softmax_p0 100 tests/ops/test_sampling.py -k "pair or many_more"
bench silu 100 silu_and_mul --backends ember,torch_compile,liger --shapes 8192x14336

#!/usr/bin/env bash
# Session 7's closing H200 run (device tool, `.whl` carried; output under $OUT; <= ~9.5 minutes),
# most important first, each step bounded: issue 6's GPU half (tools/h200_apilog.py), the harness
# rows for the changed kernels against the fastest peers measured for them (torch.compile and
# Liger), with two flat-kernel block-size variants of silu and the __expf/__fdividef form
# (-DEMBER_ACT_MUFU=0) for A/B; then the whole GPU suite.
#   EMBER_BENCH_COMMIT=$(git rev-parse --short HEAD) bash tools/h200_final7.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
bench() { local tag=$1 t=$2; shift 2; timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $OUT/t_$tag.md 2>&1; echo "-- $tag rc $?"; grep -E "^\| [a-z]" $OUT/t_$tag.md | cut -d'|' -f2-9,14-; }
echo "== issue 6 (api logging)"
timeout 80 python3 tools/h200_apilog.py --calls 5000 --rounds 3 > $OUT/apilog.txt 2>&1; echo "rc $?"; grep -E "PASS|FAIL|median|level [01]:" $OUT/apilog.txt
echo "== activations"
bench silu 100 silu_and_mul --backends ember,torch_compile,liger --shapes 8192x14336
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ACT_FLAT_THREADS=128 bench silu_t128 30 silu_and_mul --backends ember --shapes 8192x14336
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ACT_FLAT_THREADS=512 bench silu_t512 30 silu_and_mul --backends ember --shapes 8192x14336
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ACT_MUFU=0 bench silu_nomufu 30 silu_and_mul --backends ember --shapes 8192x14336
bench gelu_tanh 60 gelu_tanh_and_mul --backends ember,torch_compile --shapes 8192x14336
EMBER_EXTRA_CUDA_FLAGS=-DEMBER_ACT_MUFU=0 bench gelu_tanh_nomufu 30 gelu_tanh_and_mul --backends ember --shapes 8192x14336
bench silu_small 40 silu_and_mul --backends ember,torch_compile --shapes 1x14336,64x14336,1024x14336 --timing cuda_graph
echo "== the whole GPU suite"
timeout ${SUITE_LIMIT:-250} python3 -m pytest -q tests -p no:cacheprovider > $OUT/tests_all.txt 2>&1; echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" $OUT/tests_all.txt | head -20

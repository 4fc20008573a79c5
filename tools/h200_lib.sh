# Sourced by the session scripts (tools/h200_next*.sh) on the H200 (device tool, `.whl` carried):
# installs the carried wheels, sets the environment, runs the whole suite and exits under
# SUITE=1, and defines the helpers below (output under $OUT), chiefly:
#   bench TAG LIMIT ROUTINE ARGS...   one harness call, rows appended to $OUT/bench.jsonl
#   tests TAG LIMIT PYTEST_ARGS...    a pytest run, the summary and failures printed
# (EMBER_EXTRA_CUDA_FLAGS, when set, builds a switch's alternative for both.)
# EMBER_BENCH_COMMIT: pass the hash literally, from this machine's `git rev-parse --short HEAD`
# (`EMBER_BENCH_COMMIT=abc1234 bash tools/h200_nextN.sh`). NOTE: in session 10 the device
# copy's git metadata stayed at the session's first commit, so `$(git rev-parse ...)` run there
# labelled two later runs' rows with it (corrected by hand in h200-2026-12-03-s10{b,c}.jsonl).
# So each call prints (and writes to $OUT/tree.txt) the git tree of the copy it ran on: here,
# `git rev-parse <commit>^{tree}` must print the same hash for the rows' commit to be right.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
echo "tree $(GIT_INDEX_FILE=$(mktemp -u) bash -c 'git add -A -- . ":(exclude).whl" ":(exclude).snap"; git write-tree' 2>/dev/null)" | tee $OUT/tree.txt
if [ "${SUITE:-0}" = 1 ]; then
  timeout 560 python3 -m pytest -q tests -p no:cacheprovider --durations=15 > $OUT/tests_all.txt 2>&1
  echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed|^[0-9.]+s (call|setup)" $OUT/tests_all.txt | head -40
  grep -E "^E " $OUT/tests_all.txt | head -30
  exit 0
fi
# (The device tool returns at most 8 files from $OUT, so every call's tables go to one
# $OUT/tables.md and every pytest log to one $OUT/tests.txt, each run under a '## TAG' line.)
bench() {
  local tag=$1 t=$2 f=$OUT/.t_$1.md; shift 2
  timeout $t python3 -m ember.bench "$@" --out $OUT/bench.jsonl -q > $f 2>&1
  echo "-- $tag rc $?"; grep -E "^\| [a-z]" $f | cut -d'|' -f2-8,11,13-
  { echo "## $tag"; cat $f; } >> $OUT/tables.md; rm -f $f
}
tests() {
  local tag=$1 t=$2 f=$OUT/.tests_$1.txt; shift 2
  timeout $t python3 -m pytest -q "$@" -p no:cacheprovider --durations=3 > $f 2>&1
  echo "tests $tag {${EMBER_EXTRA_CUDA_FLAGS:-}} rc $?"
  # (the first test's setup holds the kernel tests' parallel warm-up, tests/ops/conftest.py)
  grep -E "^(FAILED|ERROR)|passed|failed|^E |^[0-9.]+s setup" $f | head -14
  { echo "## $tag {${EMBER_EXTRA_CUDA_FLAGS:-}}"; cat $f; } >> $OUT/tests.txt; rm -f $f
}
# step SECONDS NAME: false (and a line saying so) when SECONDS more would pass STEP_LIMIT (585 s).
step() { if [ $((SECONDS + $1)) -gt ${STEP_LIMIT:-585} ]; then echo "== skipped at ${SECONDS}s: $2"; return 1; fi; }
# Issue 4's acceptance table at the current build, each shape beside both FlashInfer decode paths
# (`--backends ember,flashinfer`), CUPTI, reference-checked: the three uniform shapes, Pareto
# lengths, B=4 x 32 768 and page 1, fp8 KV (session 27's h100_next71 / h200_next72).
ISSUE4_UNIFORM=64x4096x32x8x128x16,256x1024x64x8x128x16,128x2048x32x4x128x16
issue4_table() {
  local all="--backends ember,flashinfer --timing cupti --dtypes bf16"
  step 120 uni && bench uniform 120 decode --shapes $ISSUE4_UNIFORM $all
  step 60 skew && bench pareto 60 decode --shapes 64x4096x32x8x128x16 --lengths pareto $all
  step 60 small && bench small_page1 60 decode --shapes 4x32768x32x8x128x16,32x4096x32x8x128x1 $all
  step 60 fp8t && bench fp8_table 60 decode --shapes 64x4096x32x8x128x16 --kv-dtype e4m3 $all
}
# cold_compile_both: the decode module's cold compile from two fresh caches; the first is also
# the machine's first nvcc use (12.28 s on an H100 in session 27), the second has the toolchain
# warm (4.02 s). Lines go to $OUT/compile.txt.
cold_compile_both() {
  local c
  for c in first warm; do
    EMBER_CACHE_DIR=/tmp/ember-cold-$c timeout 60 python3 tools/decode_cold_compile.py --label "$c toolchain" 2>&1 | tee -a $OUT/compile.txt
  done
}
# left: seconds until STEP_LIMIT (585 s), for a last step that takes what time is left.
left() { echo $(( ${STEP_LIMIT:-585} - SECONDS )); }
# h200_tables: what an H200 call runs before its tests (h200_next74.sh; h200_next73.sh, removed in
# session 31, ran the same on an H200 only): the decode
# cold compile both ways, issue 4's table, plan() time, then issue 5's two unmet rows beside
# their peers (softmax 128 x 128 256 fp32 and bf16; silu_and_mul 8192 x 2·14 336).
h200_tables() {
  cold_compile_both
  issue4_table
  step 30 plan && timeout 30 python3 tools/decode_plan_time.py 2>&1 | tee -a $OUT/tables.md
  step 90 softmax && bench softmax 90 softmax --backends ember,torch,torch_compile,flashinfer --shapes 128x128256 --dtypes fp32,bf16
  step 60 silu && bench silu 60 silu_and_mul --backends ember,torch_compile,flashinfer,liger --shapes 8192x14336
}

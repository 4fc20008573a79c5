#!/usr/bin/env bash
# Quick perf pass of the norm kernels (no tests): install carried wheels, run tools/quick_norm.py.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 tools/quick_norm.py 2>&1 | grep -v -E "Warning|W1202" | tee $OUT/quick.txt

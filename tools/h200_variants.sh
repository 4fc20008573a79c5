#!/usr/bin/env bash
# Variant sweep of the norm kernels (tools/norm_variants.py) plus the GPU tests.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=/tmp/ember-cache FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pytest -q -x tests/ops -p no:cacheprovider 2>&1 | tail -3
python3 tools/norm_variants.py 2>&1 | tee $OUT/variants.txt

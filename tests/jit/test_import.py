"""Nothing heavy at import; a warm disk cache loads fast (DESIGN §2, PERF JIT and host costs)."""

from __future__ import annotations

import json
from pathlib import Path

from ember.jit import build_and_load
from ember.ops import toy

from .helpers import run_py

IMPORT_PROBE = """
import json, os, subprocess, sys, time
import torch

def refuse(*a, **k):
    raise AssertionError("import ember started a subprocess")

subprocess.Popen = refuse
t0 = time.perf_counter()
import ember, ember.jit, ember.config, ember.ops.toy
dt = time.perf_counter() - t0
print(json.dumps({
    "seconds": dt,
    "cache_exists": os.path.exists(os.environ["EMBER_CACHE_DIR"]),
    "cuda_initialized": torch.cuda.is_initialized(),
    "tvm_ffi_imported": "tvm_ffi" in sys.modules,
}))
"""

LOAD_PROBE = """
import json, time
import torch, tvm_ffi
from ember.jit import build_and_load
from ember.ops import toy
t0 = time.perf_counter()
m = build_and_load(toy.host_spec())
dt = time.perf_counter() - t0
a = torch.ones(4)
assert torch.equal(toy.axpy(a, a, alpha=1.0), 2 * a)
print(json.dumps({"seconds": dt}))
"""


def test_import_is_light_and_fast(isolated_ember: Path) -> None:
    proc = run_py(IMPORT_PROBE)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"import ember (torch already imported): {facts['seconds'] * 1e3:.1f} ms")
    assert not facts["cache_exists"], "import ember created the cache directory"
    assert not facts["cuda_initialized"]
    assert not facts["tvm_ffi_imported"], "tvm-ffi (and so torch) must load lazily"
    assert facts["seconds"] <= 0.25


def test_warm_disk_cache_load_is_fast() -> None:
    build_and_load(toy.host_spec())
    proc = run_py(LOAD_PROBE)
    assert proc.returncode == 0, proc.stderr
    seconds = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
    print(f"warm disk-cache load (tvm-ffi imported): {seconds * 1e3:.2f} ms")
    assert seconds <= 0.020

"""What torch.compile runs for rmsnorm at one shape, next to ember's kernel (device diagnostic).

    TORCHINDUCTOR_CACHE_DIR=$OUT/ind TORCH_LOGS=output_code python tools/dump_compiled.py 8192 8192

Leaves inductor's generated Triton source, PTX and launch metadata under the inductor cache dir;
run under `ncu` to compare the two kernels' counters (one call of each after warm-up).
"""

from __future__ import annotations

import sys

import torch

import ember
from ember.bench.routines.norm import torch_rmsnorm

rows, hidden = int(sys.argv[1]), int(sys.argv[2])
x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
w = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
compiled = torch.compile(lambda a, b: torch_rmsnorm(a, b, 1e-6), dynamic=False)
for _ in range(3):
    compiled(x, w)
    ember.rmsnorm(x, w)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
compiled(x, w)
ember.rmsnorm(x, w)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done")

"""Cold compile of one decode module (issue 4: <= 8 s) and, with ``--peers``, FlashInfer 0.5.3's
first plan + run on both decode paths (its modules compile then). Run on the device, each time
with a fresh ``EMBER_CACHE_DIR`` / ``FLASHINFER_WORKSPACE_BASE``; ``--label`` tags the line (the
machine's first nvcc use costs more than a warm toolchain: 12.28 against 4.02 s on an H100).

    EMBER_CACHE_DIR=/tmp/ember-cold python3 tools/decode_cold_compile.py [--planner] [--peers]
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--planner", action="store_true", help="build the host planner module first")
    ap.add_argument("--peers", action="store_true", help="FlashInfer's first plan + run too")
    ap.add_argument("--label", default="", help="a tag for the ember line")
    args = ap.parse_args()

    from ember.jit import build_and_load
    from ember.ops.decode import decode_spec, planner_spec

    if args.planner:
        t = time.perf_counter()
        build_and_load(planner_spec())
        print(f"ember planner (host): {time.perf_counter() - t:.2f} s")
    tag = f" ({args.label})" if args.label else ""
    t = time.perf_counter()
    build_and_load(decode_spec("bf16", "bf16", 128, 4))
    print(f"ember cold compile decode_bf16_bf16_d128_g4{tag}: {time.perf_counter() - t:.2f} s")
    if not args.peers:
        return
    import flashinfer
    import torch

    for tc in (False, True):
        buf = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(buf, "NHD", use_tensor_cores=tc)
        ip = torch.tensor([0, 4], dtype=torch.int32)
        last = torch.tensor([16], dtype=torch.int32)
        idx = torch.arange(4, dtype=torch.int32, device="cuda")
        cache = torch.randn(4, 2, 16, 8, 128, device="cuda", dtype=torch.bfloat16)
        q = torch.randn(1, 32, 128, device="cuda", dtype=torch.bfloat16)
        t = time.perf_counter()
        w.plan(ip, idx, last, 32, 8, 128, 16, q_data_type=torch.bfloat16)
        w.run(q, cache)
        torch.cuda.synchronize()
        s = time.perf_counter() - t
        print(f"flashinfer cold decode (use_tensor_cores={tc}, plan + first run): {s:.2f} s")


if __name__ == "__main__":
    main()

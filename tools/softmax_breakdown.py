"""Per-activity device time of one ember.softmax call (torch.profiler, i.e. CUPTI activity
records): how much of the harness's "sum of device work per call" is the kernel and how much the
memset of softmax_grid_kernel's counts. Three input sets rotated (cold L2), 200 calls.

    python tools/softmax_breakdown.py [--rows 128] [--vocab 128256] [--dtype fp32]
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import ember


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    xs = [(4 * torch.randn(a.rows, a.vocab, device="cuda")).to(dtype) for _ in range(3)]
    t = torch.rand(a.rows, device="cuda") + 0.3
    outs = [torch.empty(a.rows, a.vocab, device="cuda") for _ in range(3)]
    for i in range(20):
        ember.softmax(xs[i % 3], t, out=outs[i % 3])
    torch.cuda.synchronize()
    ref = torch.softmax(xs[0].double() / t.double()[:, None], dim=-1)
    torch.testing.assert_close(ember.softmax(xs[0], t).double(), ref, rtol=1e-4, atol=1e-12)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(a.calls):
            ember.softmax(xs[i % 3], t, out=outs[i % 3])
            torch.cuda.synchronize()
    per = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name[:70]].append(e.time_range.elapsed_us())
    print(f"softmax {a.rows}x{a.vocab} {a.dtype}: {a.calls} calls, device µs per activity")
    for name, times in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        us = sorted(times)
        print(f"  {name:70s} n={len(us):4d} median {us[len(us) // 2]:7.2f} min {us[0]:7.2f}")


if __name__ == "__main__":
    main()

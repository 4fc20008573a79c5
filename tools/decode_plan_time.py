"""Host time of one decode plan: ember vs FlashInfer's two decode paths (device diagnostic).

    python tools/decode_plan_time.py [--batch 64] [--len 4096] [--lengths uniform|pareto]
                                     [--peers cuda_cores,tensor_cores]

Interleaved rounds (ember.bench.host.host_times_interleaved), 2000 plans per round, one sync per
round. Both sides get host copies of indptr / last_page_len (FlashInfer's documented fast path;
ember's `host_indptr`/`host_last_page_len`), device page indices. Issue 4's target: ember's plan
<= 0.25x the faster of FlashInfer's two.
"""

from __future__ import annotations

import argparse

import torch

from ember.bench.host import host_times_interleaved
from ember.bench.routines.decode import decode_lengths
from ember.ops.decode import DecodeWorkspace, plan_batch_decode
from ember.testing import page_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--len", type=int, default=4096)
    ap.add_argument("--lengths", default="uniform")
    ap.add_argument("--heads", default="32,8")
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument(
        "--peers",
        default="cuda_cores,tensor_cores",
        help="FlashInfer decode paths whose plan() is timed (each may JIT-compile on first use)",
    )
    a = ap.parse_args()
    hq, hk = (int(x) for x in a.heads.split(","))
    dim, page = 128, a.page
    lengths = decode_lengths(a.batch, a.len, a.lengths)
    h_indptr, h_last = page_table(lengths, page)
    indices = torch.randperm(int(h_indptr[-1])).to(torch.int32).cuda()
    d_indptr, d_last = h_indptr.cuda(), h_last.cuda()
    ws = DecodeWorkspace("cuda", max_batch=a.batch, num_qo_heads=hq, head_dim=dim)
    fns = {
        "ember": lambda: plan_batch_decode(
            d_indptr,
            indices,
            d_last,
            num_qo_heads=hq,
            num_kv_heads=hk,
            head_dim=dim,
            page_size=page,
            workspace=ws,
            host_indptr=h_indptr,
            host_last_page_len=h_last,
        ),
    }
    try:
        import flashinfer

        for tc in [p == "tensor_cores" for p in a.peers.split(",") if p]:
            buf = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(buf, "NHD", use_tensor_cores=tc)
            fns[f"flashinfer[{'tensor_cores' if tc else 'cuda_cores'}]"] = lambda w=w: w.plan(
                h_indptr,
                indices,
                h_last,
                hq,
                hk,
                dim,
                page,
                q_data_type=torch.bfloat16,
                kv_data_type=torch.bfloat16,
            )
    except ImportError as exc:
        print(f"flashinfer not importable: {exc}")
    res = host_times_interleaved(fns, calls=2000, rounds=7, warmup=50)
    best_fi = min((m.stats.median_us for k, m in res.items() if k != "ember"), default=float("nan"))
    for k, m in res.items():
        print(
            f"plan B={a.batch} {a.lengths}: {k} {m.stats.median_us:.2f} us "
            f"(min {m.stats.min_us:.2f})"
        )
    print(
        f"ember / best FlashInfer plan: {res['ember'].stats.median_us / best_fi:.3f}x "
        "(target <= 0.25)"
    )


if __name__ == "__main__":
    main()

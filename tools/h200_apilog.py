"""The GPU half of issue 6's acceptance (API logging, docs/debugging.md), for an H200 box.

    python3 tools/h200_apilog.py [--calls 20000] [--rounds 3]

Each part runs in fresh subprocesses, because EMBER_LOGLEVEL is read when ember is imported:

a. a bad ``ember.batch_decode`` call (a page index far past the cache) at EMBER_LOGLEVEL=3: the
   logged call and its arguments must come before the failure in the process's stderr (R6.1);
b. ``ember.rmsnorm`` at EMBER_LOGLEVEL=5 inside ``torch.cuda.graph`` capture: the statistics
   must be skipped with the note, the capture must succeed and the replay be right (R6.5);
c. host time per call of ``ember.rmsnorm`` on a 1x4096 bf16 tensor at level 1 vs level 0 (median
   of rounds of many calls, levels interleaved, each in a fresh process; the level-1 lines go to
   a file): the difference is the logging's cost, target <= 2 us (R6.2, R6.3).

Prints each part's evidence and PASS/FAIL; exits 1 if any part fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BAD_DECODE = """
    import torch, ember
    dev = "cuda"
    pages, page_size, kv_heads, qo_heads, dim, batch = 8, 16, 8, 32, 128, 2
    cache = torch.randn(pages, 2, page_size, kv_heads, dim, dtype=torch.bfloat16, device=dev)
    indptr = torch.tensor([0, 2, 4], dtype=torch.int32)
    indices = torch.tensor([0, 1, 2, 1 << 28], dtype=torch.int32)  # the last page does not exist
    last = torch.tensor([page_size, page_size], dtype=torch.int32)
    ws = ember.DecodeWorkspace(dev, max_batch=batch, num_qo_heads=qo_heads, head_dim=dim)
    plan = ember.plan_batch_decode(
        indptr.to(dev), indices.to(dev), last.to(dev), num_qo_heads=qo_heads,
        num_kv_heads=kv_heads, head_dim=dim, page_size=page_size, workspace=ws,
        host_indptr=indptr, host_last_page_len=last,
    )
    q = torch.randn(batch, qo_heads, dim, dtype=torch.bfloat16, device=dev)
    out = ember.batch_decode(q, cache, plan)
    torch.cuda.synchronize()
    print("SYNCED: no fault was raised", out.float().abs().max().item(), flush=True)
"""

GRAPH_STATS = """
    import torch, ember
    x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    ember.rmsnorm(x, w, out=y)  # eager: loads the module, and logs statistics
    torch.cuda.synchronize()
    print("=== capture", flush=True)
    import sys; sys.stderr.write("=== capture\\n"); sys.stderr.flush()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ember.rmsnorm(x, w, out=y)
    sys.stderr.write("=== replay\\n"); sys.stderr.flush()
    y.zero_()
    g.replay()
    torch.cuda.synchronize()
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
    err = (y.float() - ref).abs().max().item()
    print(f"replay max abs error vs fp32 reference: {err:.3g}", flush=True)
    print("REPLAY_OK" if err < 0.05 else "REPLAY_BAD", flush=True)
"""

OVERHEAD = """
    import statistics, time, torch, ember
    x = torch.randn(1, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    f = ember.rmsnorm
    for _ in range(2000):
        f(x, w, out=y)
    torch.cuda.synchronize()
    per_call = []
    for _ in range({rounds}):
        t0 = time.perf_counter()
        for _ in range({calls}):
            f(x, w, out=y)
        per_call.append((time.perf_counter() - t0) / {calls} * 1e6)
        torch.cuda.synchronize()
    print("US", statistics.median(per_call), flush=True)
"""


def _run(code: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("EMBER_LOG", "EMBER_DUMP"))}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), full.get("PYTHONPATH")) if p)
    full["PYTHONUNBUFFERED"] = "1"
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _tail(text: str, n: int = 12) -> str:
    return "\n".join("    " + ln for ln in text.splitlines()[-n:])


def part_a() -> bool:
    print("== (a) bad batch_decode at EMBER_LOGLEVEL=3: the log precedes the failure")
    proc = _run(BAD_DECODE, {"EMBER_LOGLEVEL": "3", "EMBER_LOGDEST": "stderr"})
    err = proc.stderr
    print(f"  exit status {proc.returncode}; stdout: {proc.stdout.strip()!r}")
    print("  stderr (last lines):\n" + _tail(err, 30))
    logged = err.find("] ember.batch_decode")
    found = [err.find(t) for t in ("Traceback", "illegal memory access", "CUDA error", "Error")]
    failure = min((i for i in found if i >= 0), default=-1)
    ok = logged >= 0 and "plan: DecodePlan(" in err and "q: Tensor(shape=[2, 32, 128]" in err
    ok = ok and proc.returncode != 0 and "SYNCED" not in proc.stdout
    ok = ok and (failure < 0 or logged < failure)
    # NOTE: a fault may surface at the synchronize (an exception after the call) or kill the
    # process; either way the batch_decode lines must already be out.
    print(f"  batch_decode line at offset {logged}, first failure text at offset {failure}")
    print(f"  (a) {'PASS' if ok else 'FAIL'}")
    return ok


def part_b() -> bool:
    print("== (b) rmsnorm at EMBER_LOGLEVEL=5 inside torch.cuda.graph capture")
    proc = _run(GRAPH_STATS, {"EMBER_LOGLEVEL": "5", "EMBER_LOGDEST": "stderr"})
    err = proc.stderr
    print(f"  exit status {proc.returncode}; stdout:\n{_tail(proc.stdout)}")
    eager, _, rest = err.partition("=== capture\n")
    captured, _, _ = rest.partition("=== replay\n")
    print("  eager lines:\n" + _tail(eager, 8))
    print("  lines during capture:\n" + _tail(captured, 12))
    ok = proc.returncode == 0 and "REPLAY_OK" in proc.stdout
    ok = ok and "stats x: min=" in eager  # statistics outside the capture
    ok = ok and "stats skipped: CUDA graph capture" in captured and "stats x:" not in captured
    print(f"  (b) {'PASS' if ok else 'FAIL'}")
    return ok


def part_c(calls: int, rounds: int) -> bool:
    print(f"== (c) host time per ember.rmsnorm(1x4096 bf16) call, level 1 vs 0 ({calls} calls x")
    print(f"   {rounds} rounds per process, median; levels interleaved over {rounds} processes)")
    times: dict[int, list[float]] = {0: [], 1: []}
    code = OVERHEAD.format(calls=calls, rounds=rounds)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for level in (0, 1) if i % 2 == 0 else (1, 0):
                env = {"EMBER_LOGLEVEL": str(level), "EMBER_LOGDEST": f"{tmp}/api-%p.log"}
                proc = _run(code, env)
                if proc.returncode != 0:
                    print(f"  level {level} failed:\n{_tail(proc.stderr)}")
                    return False
                us = float(proc.stdout.split("US", 1)[1])
                times[level].append(us)
                print(f"  level {level}: {us:.3f} us/call")
        lines = sum(len(p.read_text().splitlines()) for p in Path(tmp).glob("api-*.log"))
    m0, m1 = statistics.median(times[0]), statistics.median(times[1])
    expected = rounds * (2000 + calls * rounds)
    print(f"  median level 0: {m0:.3f} us, level 1: {m1:.3f} us, difference {m1 - m0:.3f} us")
    print(f"  level-1 log lines written: {lines} (expected {expected})")
    ok = m1 - m0 <= 2.0 and lines == expected
    print(f"  (c) {'PASS' if ok else 'FAIL'} (target: difference <= 2 us)")
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    results = [part_a(), part_b(), part_c(args.calls, args.rounds)]
    print(
        "== summary:",
        " ".join(f"({x}) {'PASS' if r else 'FAIL'}" for x, r in zip("abc", results, strict=True)),
    )
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

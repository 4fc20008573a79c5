"""Print where a kernel's instructions and stalls go, from an Nsight Compute report with the
SourceCounters section (device-side helper for the session scripts' profiles).

    ncu --section SourceCounters -o rep ...
    python3 tools/ncu_source_top.py rep.ncu-rep [N] [--regions 0x7f0,0x2cd0,...]

Runs `ncu --import <rep> --page source --print-source sass --csv` and ranks its rows by the
"Instructions Executed" column; prints the total, the share by opcode (the first word of the
SASS), and the top N lines with their share. Where the report has the warp-stall sampling
column, it also ranks the lines by their samples (where the time goes, not only the issue
slots). `--regions` splits the kernel at the given SASS offsets (from `cuobjdump -sass` of the
same build: the loop, each select, the draw) and prints each region's share of both;
`--csv-out` keeps the whole source page for a look afterwards.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import subprocess
import sys


def _column(cols: list[str], prefix: str) -> int | None:
    return next((i for i, c in enumerate(cols) if c.startswith(prefix)), None)


def _number(text: str) -> float:
    try:
        return float(text.replace(",", "") or 0)
    except ValueError:
        return 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("top", nargs="?", type=int, default=40)
    ap.add_argument("--regions", default="", help="comma-separated SASS offsets to split at")
    ap.add_argument("--csv-out", default="", help="also write the source page's CSV here")
    args = ap.parse_args()
    text = subprocess.run(
        ["ncu", "--import", args.report, "--page", "source", "--print-source", "sass", "--csv"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = list(csv.reader(io.StringIO(text)))
    key = "Instructions Executed"
    head = next((i for i, r in enumerate(rows) if any(key in c for c in r)), None)
    if head is None:
        print(f"no {key!r} column; first lines:")
        print("\n".join(text.splitlines()[:5]))
        return 1
    cols = rows[head]
    n_col = _column(cols, key)
    assert n_col is not None
    stall_col = _column(cols, "Warp Stall Sampling (All")
    s_col = next((i for i, c in enumerate(cols) if c == "Source"), 1)
    a_col = next((i for i, c in enumerate(cols) if c == "Address"), 0)
    lines = []  # (instructions, stall samples, address, SASS)
    for r in rows[head + 1 :]:
        if len(r) <= max(n_col, s_col):
            continue
        stalls = _number(r[stall_col]) if stall_col is not None and stall_col < len(r) else 0.0
        lines.append((_number(r[n_col]), stalls, r[a_col], r[s_col].strip()))
    total = sum(n for n, _, _, _ in lines) or 1.0
    samples = sum(s for _, s, _, _ in lines) or 1.0
    print(f"{len(lines)} SASS lines, {total:.4g} warp instructions executed, {samples:.4g} samples")
    by_op: collections.Counter[str] = collections.Counter()
    for n, _, _, src in lines:
        words = [w for w in src.split() if not w.startswith("@")] or ["?"]
        by_op[words[0]] += n  # the opcode, past a predicate guard
    print("by opcode: " + ", ".join(f"{op} {n / total:.1%}" for op, n in by_op.most_common(14)))
    if args.csv_out:
        with open(args.csv_out, "w") as out:
            out.write(text)
    if args.regions:
        # the report's addresses are where the code was loaded: offsets from the kernel's first
        base = min((int(a, 16) for _, _, a, _ in lines if a.strip()), default=0)
        edges = [int(a, 16) for a in args.regions.split(",")]
        share = collections.defaultdict(lambda: [0.0, 0.0])
        for n, s, addr, _ in lines:
            at = int(addr, 16) - base if addr.strip() else 0
            region = sum(1 for e in edges if at >= e)  # 0: before the first edge
            share[region][0] += n
            share[region][1] += s
        names = ["start"] + [f">= {e:#x}" for e in edges]
        for region in range(len(names)):
            n, s = share[region]
            print(
                f"region {names[region]:>10}: {n / total:6.1%} instructions, {s / samples:6.1%} "
                "stall samples"
            )
    print("top lines by instructions executed:")
    for n, _, addr, src in sorted(lines, reverse=True)[: args.top]:
        print(f"{n / total:6.2%} {addr:>8} {src}")
    if stall_col is not None:
        print("top lines by warp-stall samples:")
        for _, s, addr, src in sorted(lines, key=lambda x: x[1], reverse=True)[: args.top]:
            print(f"{s / samples:6.2%} {addr:>8} {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

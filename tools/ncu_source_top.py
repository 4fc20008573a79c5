"""Print the SASS lines of a kernel that executed the most instructions, from an Nsight Compute
report with the SourceCounters section (device-side helper for tools/h200_next9.sh PROFILE=1).

    ncu --section SourceCounters -o rep ...; python3 tools/ncu_source_top.py rep.ncu-rep [N]

Runs `ncu --import <rep> --page source --print-source sass --csv` and ranks its rows by the
"Instructions Executed" column; prints the total, the top N lines with their share, and the
share by opcode (the first word of the SASS), which is what says where a pass's instructions go.
"""

from __future__ import annotations

import collections
import csv
import io
import subprocess
import sys


def main() -> int:
    rep = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    text = subprocess.run(
        ["ncu", "--import", rep, "--page", "source", "--print-source", "sass", "--csv"],
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
    n_col = next(i for i, c in enumerate(cols) if c.startswith(key))
    s_col = next((i for i, c in enumerate(cols) if c == "Source"), 1)
    a_col = next((i for i, c in enumerate(cols) if c == "Address"), 0)
    lines = []
    for r in rows[head + 1 :]:
        if len(r) <= max(n_col, s_col):
            continue
        try:
            n = float(r[n_col].replace(",", "") or 0)
        except ValueError:
            continue
        lines.append((n, r[a_col], r[s_col].strip()))
    total = sum(n for n, _, _ in lines) or 1.0
    print(f"{len(lines)} SASS lines, {total:.4g} warp instructions executed")
    by_op: collections.Counter[str] = collections.Counter()
    for n, _, src in lines:
        words = [w for w in src.split() if not w.startswith("@")] or ["?"]
        by_op[words[0]] += n  # the opcode, past a predicate guard
    print("by opcode: " + ", ".join(f"{op} {n / total:.1%}" for op, n in by_op.most_common(14)))
    for n, addr, src in sorted(lines, reverse=True)[:top]:
        print(f"{n / total:6.2%} {addr:>8} {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Render harness rows (a ``--out`` JSONL of ``python -m ember.bench``) as the markdown tables and
comparison lines the harness prints, one table per routine, for ``docs/perf/h200.md``.

    python tools/perf_tables.py docs/perf/h200-2026-12-03-issue5.jsonl > tables.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from ember.bench.report import Row, comparison_lines, markdown_table


def render(path: Path) -> str:
    fields = {f.name for f in dataclasses.fields(Row)}
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            rows.append(Row(**{k: v for k, v in json.loads(line).items() if k in fields}))
    out: list[str] = []
    for name in dict.fromkeys(r.routine for r in rows):
        mine = [r for r in rows if r.routine == name]
        out.append(f"#### {name} (`{mine[0].ember_commit}`, {mine[0].date[:10]})\n")
        out.append(markdown_table(mine))
        out.extend(comparison_lines(mine))
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl", type=Path)
    print(render(ap.parse_args().jsonl))


if __name__ == "__main__":
    main()

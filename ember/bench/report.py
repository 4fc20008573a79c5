"""Bench results: the row schema, the JSONL log, the markdown table and the peer comparison.

One :class:`Row` per routine x shape x dtype x backend variant. A row that was not timed says why
in ``status`` (``skipped: ...``, ``REFCHECK FAILED``, ``error: ...``) and has no numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = [
    "ROW_FIELDS",
    "STATUS_OK",
    "STATUS_REFCHECK_FAILED",
    "Row",
    "append_jsonl",
    "comparison_lines",
    "markdown_table",
    "mark_best",
]

STATUS_OK = "ok"
STATUS_REFCHECK_FAILED = "REFCHECK FAILED"
DEFAULT_VARIANT = "default"
# (routine, shape, dtype, "k=v, ..." of the routine's parameters): rows compared with each other
Workload = tuple[str, str, str, str]


@dataclass
class Row:
    """One bench result; :meth:`to_json` is the JSONL schema.

    Attributes
    ----------
    routine, backend, variant:
        What ran; ``variant`` is ``default`` for a backend's plain call.
    shape, dtype:
        The workload (``8192x4096``, ``bf16``).
    status:
        ``ok``, ``REFCHECK FAILED``, ``skipped: <why>`` or ``error: <what>``.
    timing:
        Mechanism that produced the numbers: ``cupti``, ``cuda_event``, ``cuda_graph`` or
        ``host_wall``; ``None`` when not timed.
    timing_detail, l2:
        How the mechanism ran (calls per graph replay) and how L2 was kept cold.
    median_us, std_us, min_us, iters:
        Per-call time statistics and the number of timed calls.
    bytes, flops:
        Fewest bytes moved / operations of one call.
    gbps, tflops:
        ``bytes`` / median and ``flops`` / median.
    pct_of_copy_ceiling:
        ``gbps`` as a percentage of the measured device-to-device copy bandwidth.
    refcheck:
        ``passed``, ``failed``, ``off`` (``--no-refcheck``) or ``n/a`` (not reached).
    ref_max_abs_err, ref_rel_l2_err, reference, tolerance:
        Reference check numbers, which reference, and ``[rtol, atol]``.
    best:
        Fastest variant of its backend for this workload.
    arch, device, backend_version, torch, cuda, ember_commit, date:
        Where and when.
    params:
        Routine parameters (``eps``).
    notes:
        Anything else a reader needs (a timing fallback, the reason for a failure).
    cmd:
        Command line that reproduces exactly this row (with the build switches' environment).
    build:
        Non-default build switches of ember's kernels in the run (``EMBER_EXTRA_CUDA_FLAGS``),
        e.g. ``-DEMBER_ACT_FLAT=0`` for an A/B build; empty for the default build.
    """

    routine: str
    backend: str
    variant: str
    shape: str
    dtype: str
    status: str = STATUS_OK
    timing: str | None = None
    timing_detail: str = ""
    l2: str = ""
    median_us: float | None = None
    std_us: float | None = None
    min_us: float | None = None
    iters: int | None = None
    bytes: int | None = None
    flops: int | None = None
    gbps: float | None = None
    tflops: float | None = None
    pct_of_copy_ceiling: float | None = None
    refcheck: str = "n/a"
    ref_max_abs_err: float | None = None
    ref_rel_l2_err: float | None = None
    reference: str = ""
    tolerance: list[float] | None = None
    best: bool = False
    arch: str = ""
    device: str = ""
    backend_version: str = ""
    torch: str = ""
    cuda: str = ""
    ember_commit: str = ""
    date: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cmd: str = ""
    build: str = ""

    @property
    def label(self) -> str:
        """``flashinfer`` for the default variant, ``flashinfer[pdl]`` otherwise; an A/B build
        adds its switches: ``ember {-DEMBER_ACT_FLAT=0}``."""
        base = self.backend
        if self.variant != DEFAULT_VARIANT:
            base += f"[{self.variant}]"
        return f"{base} {{{self.build}}}" if self.build else base

    @property
    def series(self) -> str:
        """The backend, told apart from its A/B builds (which are never its peers)."""
        return f"{self.backend} {{{self.build}}}" if self.build else self.backend

    @property
    def ok(self) -> bool:
        """Timed and (when checked) correct."""
        return self.status == STATUS_OK and self.median_us is not None

    @property
    def workload(self) -> Workload:
        """``(routine, shape, dtype, params)``: rows with the same workload are compared. The
        routine's parameters (``kv_dtype=e4m3, lengths=pareto``) are part of it, so that rows of
        one shape under other parameters are never ranked against each other."""
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return (self.routine, self.shape, self.dtype, params)

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict; keys are :data:`ROW_FIELDS` in order.

        Non-finite numbers (an infinite error of a failed check) become ``None``: strict JSON has
        no NaN or Infinity.
        """
        return {k: _finite_or_none(v) for k, v in asdict(self).items()}


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: Every key of a JSONL row, in order.
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Row))


def append_jsonl(rows: Iterable[Row], path: Path) -> int:
    """Append rows to a JSONL file (created with its directory); the number written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row.to_json(), sort_keys=False) + "\n")
            n += 1
    return n


def mark_best(rows: Sequence[Row]) -> None:
    """Set ``best`` on the fastest timed variant of each backend (each A/B build apart) for each
    workload."""
    groups: dict[tuple[str, ...], list[Row]] = {}  # (*workload, series)
    for r in rows:
        r.best = False
        if r.ok:
            groups.setdefault((*r.workload, r.series), []).append(r)
    for group in groups.values():
        min(group, key=lambda r: r.median_us or 0.0).best = True


def _num(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}".replace(",", " ")
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


_COLUMNS = (
    "routine", "backend", "shape", "dtype", "timing", "median µs", "std µs", "min µs", "iters",
    "GB/s", "TFLOP/s", "% copy", "refcheck", "status",
)  # fmt: skip


def markdown_table(rows: Sequence[Row]) -> str:
    """The rows as a GitHub markdown table (ready for ``docs/perf/h200.md``)."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    several = _backends_with_several_variants(rows)
    for r in rows:
        label = r.label
        if r.best and (*r.workload, r.series) in several:
            label += " (best)"
        cells = [
            r.routine,
            label,
            r.shape,
            r.dtype,
            r.timing or "—",
            _num(r.median_us),
            _num(r.std_us),
            _num(r.min_us),
            _num(r.iters),
            _num(r.gbps, 0),
            _num(r.tflops, 1),
            _num(r.pct_of_copy_ceiling, 1),
            r.refcheck,
            r.status.replace("|", "/"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _backends_with_several_variants(rows: Sequence[Row]) -> set[tuple[str, ...]]:
    counts: dict[tuple[str, ...], int] = {}
    for r in rows:
        if r.ok:
            key = (*r.workload, r.series)
            counts[key] = counts.get(key, 0) + 1
    return {k for k, n in counts.items() if n > 1}


def _ratio(mine: Row, peer: Row) -> str:
    mine_us, peer_us = mine.median_us or 0.0, peer.median_us or 0.0
    if mine_us <= 0 or peer_us <= 0:
        return "n/a (zero time)"
    return f"{mine_us / peer_us:.3f}x time ({peer_us / mine_us:.2f}x speed-up)"


def _peer_line(w: Workload, mine: Row | None, peers: list[Row], subject: str) -> str:
    head = f"- {w[0]} {w[1]} {w[2]}" + (f" [{w[3]}]" if w[3] else "") + ": "
    if not peers:
        return head + "no timed peer"
    top = peers[0]
    text = f"best peer {top.label} {_num(top.median_us)} µs"
    if mine is None:
        return head + text + f"; {subject}: not timed"
    text += f"; {mine.label} {_num(mine.median_us)} µs; {subject}/best peer " + _ratio(mine, top)
    others = [f"{p.label} {_ratio(mine, p)}" for p in peers[1:]]
    if others:
        text += "; vs " + ", ".join(others)
    if len({r.timing for r in (mine, *peers)}) > 1:
        text += " [WARNING: mixed timing mechanisms, not comparable]"
    return head + text


def comparison_lines(rows: Sequence[Row], *, subject: str = "ember") -> list[str]:
    """Per workload: the best peer, and ``subject``'s time ratio and speed-up against each peer.

    Only timed rows count; a workload whose rows used different timing mechanisms says so, since
    such times are not comparable. Rows of A/B builds of ``subject`` (:attr:`Row.build`) are
    neither ``subject`` nor peers: each gets its ratio against ``subject``'s default build.
    """
    order: list[Workload] = []
    best: dict[Workload, dict[str, Row]] = {}
    for r in rows:
        if r.workload not in best:
            order.append(r.workload)
            best[r.workload] = {}
        if not r.ok:
            continue
        held = best[r.workload].get(r.series)
        if held is None or (r.median_us or 0.0) < (held.median_us or 0.0):
            best[r.workload][r.series] = r
    lines: list[str] = []
    for w in order:
        by_backend = best[w]
        mine = by_backend.get(subject)
        builds = [r for r in by_backend.values() if r.backend == subject and r.build]
        peers = sorted(
            (r for b, r in by_backend.items() if b != subject and not r.build),
            key=lambda r: r.median_us or 0.0,
        )
        lines.append(_peer_line(w, mine, peers, subject))
        base, against = (mine, "the default build") if mine else (peers[0] if peers else None, "")
        for b in builds:
            text = f"  - A/B build {{{b.build}}} {_num(b.median_us)} µs"
            if base is not None:
                text += f": {_ratio(b, base)} against {against or base.label}"
            lines.append(text)
    return lines

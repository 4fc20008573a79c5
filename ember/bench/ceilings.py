"""Measured ceilings: device-to-device copy bandwidth and bf16 GEMM rate, cached per device.

``ember bench ceilings`` measures both (``--remeasure`` to measure again); routines read the
cached values so each row can say what percentage of the copy bandwidth it reached. The cache is
``<EMBER_CACHE_DIR>/bench/ceilings.json``, keyed by device name::

    {"version": 1, "devices": {"NVIDIA H200": {"copy_gbps": 4249.0, "gemm_bf16_tflops": 690.1,
                                               "measured_at": "...", "details": {...}}}}

Copy: ``dst.copy_(src)`` on a large bf16 tensor (1 GiB, or an eighth of free memory when less),
bytes read + bytes written. GEMM: ``torch.matmul(a, b, out=c)`` at 8192^3 on random bf16 data,
2 x M x N x K operations. Both are reference-checked like every other row.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.bench.case import Case, Impl, Inputs
from ember.config import knobs

if TYPE_CHECKING:
    from ember.bench.harness import BenchContext
    from ember.bench.report import Row

__all__ = [
    "CEILINGS",
    "Ceilings",
    "ceilings_path",
    "copy_work",
    "gemm_work",
    "load_ceilings",
    "measure_ceilings",
    "save_ceilings",
]

logger = logging.getLogger(__name__)

CEILINGS = "ceilings"
_VERSION = 1
_GEMM_N = 8192
_COPY_MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class Ceilings:
    """The measured limits of one device."""

    device: str
    copy_gbps: float
    gemm_bf16_tflops: float
    measured_at: str
    details: dict[str, Any] = field(default_factory=dict)


def ceilings_path() -> Path:
    """``<EMBER_CACHE_DIR>/bench/ceilings.json``."""
    return knobs.cache_dir / "bench" / "ceilings.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable ceilings cache %s: %s", path, exc)
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    devices = data.get("devices")
    return devices if isinstance(devices, dict) else {}


def load_ceilings(device: str, path: Path | None = None) -> Ceilings | None:
    """The cached ceilings of ``device``, or ``None`` when none are cached (or the file is bad)."""
    entry = _read(path or ceilings_path()).get(device)
    if not isinstance(entry, dict):
        return None
    try:
        return Ceilings(
            device=device,
            copy_gbps=float(entry["copy_gbps"]),
            gemm_bf16_tflops=float(entry["gemm_bf16_tflops"]),
            measured_at=str(entry.get("measured_at", "")),
            details=dict(entry.get("details", {})),
        )
    except (KeyError, TypeError, ValueError):
        return None


def save_ceilings(ceilings: Ceilings, path: Path | None = None) -> Path:
    """Store ``ceilings`` under its device name, keeping other devices; atomic replace."""
    path = path or ceilings_path()
    devices = _read(path)
    entry = asdict(ceilings)
    del entry["device"]
    devices[ceilings.device] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ceilings-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": _VERSION, "devices": devices}, f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _torch() -> Any:
    import torch

    return torch


def copy_work(ctx: BenchContext) -> tuple[Case, Impl]:
    """The copy-bandwidth case: ``dst.copy_(src)``, bf16, bytes read + written."""
    nbytes = min(_COPY_MAX_BYTES, max(ctx.env.free_bytes // 8, 1 << 20))
    numel = nbytes // 2
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        src = torch.randn(numel, dtype=torch.bfloat16, device=device)
        return {"src": src, "dst": torch.empty_like(src)}

    case = Case(
        routine=CEILINGS,
        shape=(numel,),
        dtype="bf16",
        make_inputs=make_inputs,
        reference=lambda i: (i["src"],),
        outputs=lambda i, _result: (i["dst"],),
        nbytes=2 * numel * 2,
        params={"what": "device-to-device copy"},
        cli=("--remeasure",),
        reference_source="the source tensor",
        tolerance=(0.0, 0.0),
    )
    impl = Impl(
        "torch",
        "copy",
        lambda i: functools.partial(i["dst"].copy_, i["src"]),
        _torch().__version__,
    )
    return case, impl


def gemm_work(ctx: BenchContext, n: int = _GEMM_N) -> tuple[Case, Impl]:
    """The bf16 GEMM case: ``torch.matmul(a, b, out=c)``, n^3, 2 n^3 operations."""
    device = ctx.device

    def make_inputs() -> Inputs:
        torch = _torch()
        a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
        b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
        return {"a": a, "b": b, "c": torch.empty_like(a)}

    def reference(i: Inputs) -> tuple[Any, ...]:
        return (i["a"].float() @ i["b"].float(),)

    case = Case(
        routine=CEILINGS,
        shape=(n, n, n),
        dtype="bf16",
        make_inputs=make_inputs,
        reference=reference,
        outputs=lambda i, _result: (i["c"],),
        nbytes=3 * n * n * 2,
        flops=2 * n**3,
        params={"what": "bf16 GEMM (cuBLAS via torch.matmul)"},
        cli=("--remeasure",),
        reference_source="fp32 torch.matmul",
        # NOTE: |c| ~ sqrt(n) ~ 90; bf16 rounding alone is up to 0.25 there.
        tolerance=(1e-2, 0.5),
    )
    torch = _torch()
    impl = Impl(
        "torch",
        "gemm_bf16",
        lambda i: functools.partial(torch.matmul, i["a"], i["b"], out=i["c"]),
        torch.__version__,
    )
    return case, impl


def measure_ceilings(
    ctx: BenchContext, *, gemm_n: int = _GEMM_N
) -> tuple[Ceilings | None, list[Row]]:
    """Measure both ceilings on ``ctx``'s device; the ceilings (``None`` if a row failed) and rows.

    The caller saves them (:func:`save_ceilings`).
    """
    copy_row = ctx.run_case(*copy_work(ctx))
    gemm_row = ctx.run_case(*gemm_work(ctx, gemm_n))
    rows = [copy_row, gemm_row]
    if not (copy_row.ok and gemm_row.ok) or copy_row.gbps is None or gemm_row.tflops is None:
        return None, rows
    copy_row.pct_of_copy_ceiling = 100.0
    details = {
        "copy": {"bytes": copy_row.bytes, "median_us": copy_row.median_us},
        "gemm": {"shape": gemm_row.shape, "median_us": gemm_row.median_us},
        "timing": copy_row.timing,
        "torch": ctx.env.torch,
        "cuda": ctx.env.cuda,
    }
    return Ceilings(ctx.env.device, copy_row.gbps, gemm_row.tflops, ctx.env.date, details), rows

"""Batch decode attention over a paged KV cache: plan on the host, run on the device.

The cache convention is the one serving engines use (FlashInfer's): ``kv_indptr [B+1]`` and
``kv_indices`` name each request's pages in order, ``kv_last_page_len [B]`` says how many slots
of its last page are filled (all int32); the cache is ``[pages, 2, page_size, kv_heads,
head_dim]`` (``NHD``) or ``[pages, 2, kv_heads, page_size, head_dim]`` (``HND``), or a ``(k, v)``
pair of ``[pages, page_size, kv_heads, head_dim]`` / ``[pages, kv_heads, page_size, head_dim]``.

``plan_batch_decode`` runs once per step on the host: the planner (``ember/decode_plan.h``)
splits long requests into work units so that small or skewed batches still fill the GPU
(split-KV, sized by a cost model of waves of the kernel's resident CTAs), and the tables are
copied into the workspace's fixed device buffers — on a GPU in one call of the decode module
(``plan_upload``), without a GPU through the host module ``decode_plan_host`` (R3: plan/run).
``batch_decode`` only launches the decode kernel (``ember/decode_tc.cuh`` on tensor cores at
head_dim 64/128, ``ember/decode.cuh`` at 256) and the merge of split requests; it reads only the
workspace's buffers, so a CUDA graph captured once replays with each new plan. Measurements and
design history: ``docs/perf/notes/decode.md``.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR
from ember.trace import trace
from ember.trace.attention import BATCH_DECODE, SINGLE_DECODE

__all__ = [
    "LAYOUTS",
    "batch_decode",
    "decode_spec",
    "DecodePlan",
    "DecodeWorkspace",
    "kv_lengths",
    "plan_batch_decode",
    "planner_spec",
    "single_decode",
]

LAYOUTS = ("NHD", "HND")
WORK_FIELDS = ("request", "kv_start", "kv_end", "slot")
_OPTIONS: dict[tuple[Any, ...], tuple[str, str, float, float, float, float]] = {}
# NOTE: tokens below which a request is never split: a unit shorter than this spends more on
# the merge than it gains in parallelism (to be tuned on the H200 with the kernels).
MIN_CHUNK = 256
# NOTE: resident decode CTAs per SM the planner assumes without a GPU (the tensor-core kernel's
# on H100/H200); on a GPU the decode module's occupancy query gives the real number.
CTAS_PER_SM = 2
# NOTE: work-table rows per SM a default workspace holds: plans past 4 CTAs per SM of work units
# (~2 waves) gain nothing measurable, and the partial buffers stay small.
WORK_PER_SM = 4


def planner_spec() -> KernelSpec:
    """The host (CPU) module holding the batch-decode planner."""
    return KernelSpec(
        uri="decode_plan_host",
        sources=(CSRC_DIR / "ops" / "decode_plan.cc",),
        toolchain="host",
    )


# name -> (C++ storage type, DLPack code, bits)
KV_DTYPES: dict[str, tuple[str, int, int]] = {
    "bf16": ("ember::bfloat16", 4, 16),  # kDLBfloat
    "fp16": ("ember::half", 2, 16),  # kDLFloat
    "e4m3": ("ember::fp8e4m3", 10, 8),  # kDLFloat8_e4m3fn
}
HEAD_DIMS = (64, 128, 256)
GROUPS = (1, 2, 3, 4, 5, 6, 7, 8)


def decode_spec(q_dtype: str, kv_dtype: str, head_dim: int, group: int) -> KernelSpec:
    """The decode module for one specialization (dtypes, head_dim, GQA group).

    Layout and page size are runtime arguments of the same module. fp8 (``e4m3``) KV needs
    sm_89+; the rest any GPU from sm_80 on.
    """
    if q_dtype not in ("bf16", "fp16"):
        raise ValueError(f"decode_spec: q_dtype must be bf16 or fp16, got {q_dtype!r}")
    if kv_dtype not in (q_dtype, "e4m3"):
        raise ValueError(f"decode_spec: kv_dtype must be {q_dtype} or e4m3, got {kv_dtype!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"decode_spec: head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
    if group not in GROUPS:
        raise ValueError(f"decode_spec: group must be 1-8, got {group!r}")
    qt, qcode, qbits = KV_DTYPES[q_dtype]
    kt, kcode, kbits = KV_DTYPES[kv_dtype]
    ops = CSRC_DIR / "ops"
    shape = (f"-DEMBER_DECODE_HEAD_DIM={head_dim}", f"-DEMBER_DECODE_GROUP={group}")
    return KernelSpec(
        uri=f"decode_{q_dtype}_{kv_dtype}_d{head_dim}_g{group}",
        sources=(ops / "decode.cc", ops / "decode.cu"),
        archs=("sm89+",) if kv_dtype == "e4m3" else ("sm80+",),
        cflags=(
            f"-DEMBER_DECODE_Q_DL_CODE={qcode}",
            f"-DEMBER_DECODE_Q_DL_BITS={qbits}",
            f"-DEMBER_DECODE_KV_DL_CODE={kcode}",
            f"-DEMBER_DECODE_KV_DL_BITS={kbits}",
            *shape,
        ),
        cuda_cflags=(f"-DEMBER_DECODE_QTYPE={qt}", f"-DEMBER_DECODE_KVTYPE={kt}", *shape),
        params=(
            ("q_dtype", q_dtype),
            ("kv_dtype", kv_dtype),
            ("head_dim", head_dim),
            ("group", group),
        ),
    )


@register("decode")
def _specs() -> Iterator[KernelSpec]:
    yield planner_spec()
    # NOTE: the common serving specializations; others build on first use.
    for dt in ("bf16", "fp16"):
        for group in (1, 4, 8):
            yield decode_spec(dt, dt, 128, group)


_DECODE: dict[tuple[str, str, int, int], Any] = {}


def _decode_module(q_dtype: str, kv_dtype: str, head_dim: int, group: int) -> Any:
    key = (q_dtype, kv_dtype, head_dim, group)
    mod = _DECODE.get(key)
    if mod is None:
        torch = _torch()
        if torch.cuda.is_available() and _capturing():
            raise RuntimeError(
                "ember.batch_decode: module decode_{}_{}_d{}_g{} is not loaded yet and the stream "
                "is capturing a CUDA graph; run once before capture (compiling inside a capture "
                "is refused)".format(*key)
            )
        mod = _DECODE[key] = build_and_load(decode_spec(*key))
    return mod


@functools.cache
def _planner() -> Any:
    return build_and_load(planner_spec())


@functools.cache
def _sm_count(device: Any) -> int:
    import torch

    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def _capturing() -> bool:
    return bool(_torch().cuda.is_current_stream_capturing())


def _torch() -> Any:
    import torch

    return torch


def kv_lengths(kv_indptr: Any, kv_last_page_len: Any, page_size: int) -> list[int]:
    """Tokens per request: ``(pages - 1) * page_size + last_page_len`` (0 without pages)."""
    ip = [int(v) for v in kv_indptr.tolist()]
    last = [int(v) for v in kv_last_page_len.tolist()]
    return [
        0 if ip[b + 1] == ip[b] else (ip[b + 1] - ip[b] - 1) * page_size + last[b]
        for b in range(len(last))
    ]


class DecodeWorkspace:
    """Fixed device buffers a plan is written into (and the decode kernels read).

    One workspace per engine and device: every plan made with it writes the same addresses, so a
    CUDA graph that captured a ``run`` replays with whatever plan came last (``graph=True``
    launches size their grids to the workspace, not to the plan).

    Parameters
    ----------
    device:
        The CUDA device (``torch.device`` or index); ``"cpu"`` makes a host-only workspace for
        planning without a GPU (tests).
    max_batch:
        Most requests a plan may hold.
    num_qo_heads, head_dim:
        Size the partial-result buffers of split requests.
    max_work:
        Rows of the work table (work units a plan may hold; split requests need one partial
        slot per unit); default ``max(max_batch, 4 x SMs)``.
    sm_count:
        SMs the plans fill; default the device's (132 for a ``"cpu"`` workspace).
    graph:
        Launch grids sized to the workspace (CUDA-graph replay with changing plans).
    """

    def __init__(
        self,
        device: Any,
        *,
        max_batch: int,
        num_qo_heads: int,
        head_dim: int,
        max_work: int | None = None,
        graph: bool = False,
        sm_count: int | None = None,
    ) -> None:
        torch = _torch()
        for name, value in (
            ("max_batch", max_batch),
            ("num_qo_heads", num_qo_heads),
            ("head_dim", head_dim),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"DecodeWorkspace: `{name}` must be an int >= 1, got {value!r}")
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if sm_count is None:
            sm_count = 132 if self.device.type == "cpu" else _sm_count(self.device)
        self.sm_count = sm_count
        self.target_ctas = sm_count * CTAS_PER_SM  # until a kernel's occupancy is known
        self._waves: dict[tuple[str, str, int, int], tuple[Any, int]] = {}
        if max_work is None:
            max_work = max(max_batch, WORK_PER_SM * sm_count)
        if not isinstance(max_work, int) or not max_batch <= max_work <= 65535:
            raise ValueError(
                f"DecodeWorkspace: `max_work` must be an int in [max_batch ({max_batch}), 65535], "
                f"got {max_work!r}"
            )
        self.max_batch, self.max_work, self.graph = max_batch, max_work, graph
        self.num_qo_heads, self.head_dim = num_qo_heads, head_dim
        pin = self.device.type == "cuda"
        i32 = torch.int32
        # NOTE: the work table and merge_indptr share one buffer, so a plan is one copy.
        n_work_ints = max_work * len(WORK_FIELDS)
        self.host_tables = torch.empty(n_work_ints + max_batch + 1, dtype=i32, pin_memory=pin)
        self.host_work = self.host_tables[:n_work_ints].view(max_work, len(WORK_FIELDS))
        self.host_merge = self.host_tables[n_work_ints:]
        # NOTE: the previous plan's host-to-device copy must finish before the pinned tables are
        # rewritten: the decode module's plan_upload waits on this event, then records it after
        # the copy (an integer CUDA event handle, made by the first module that plans).
        self.event = 0
        if self.device.type == "cpu":
            self.tables = self.host_tables
        else:
            self.tables = torch.empty_like(self.host_tables, device=self.device)
        self.work = self.tables[:n_work_ints].view(max_work, len(WORK_FIELDS))
        self.merge_indptr = self.tables[n_work_ints:]
        f32 = torch.float32
        self.partial_o = torch.empty(max_work, num_qo_heads, head_dim, dtype=f32, device=device)
        self.partial_lse = torch.empty(max_work, num_qo_heads, dtype=f32, device=device)

    def wave(self, q_dtype: str, kv_dtype: str, head_dim: int, group: int) -> tuple[Any, int]:
        """The decode module for this specialization (None for a CPU workspace) and how many of
        its CTAs run at once on the device (the planner's wave)."""
        key = (q_dtype, kv_dtype, head_dim, group)
        hit = self._waves.get(key)
        if hit is None:
            mod, n = None, CTAS_PER_SM
            if self.device.type == "cuda":
                mod = _decode_module(q_dtype, kv_dtype, head_dim, group)
                n = int(mod.ctas_per_sm(self.device.index))
                if not self.event:
                    self.event = int(mod.create_event(self.device.index))
                    weakref.finalize(self, mod.destroy_event, self.event)
            hit = self._waves[key] = (mod, self.sm_count * n)
        return hit


class DecodePlan(NamedTuple):
    """What ``run`` launches: the specialization, the scalars and the workspace tables.

    Immutable; a later plan with the same workspace rewrites the tables it points to (the
    engine's step boundary), which is what lets a captured graph pick the new plan up.
    NOTE: a NamedTuple, not a frozen dataclass: 0.5 instead of 3.3 µs to make, per step.
    """

    batch: int
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    page_size: int
    layout: str
    q_dtype: str
    kv_dtype: str
    sm_scale: float
    logits_soft_cap: float
    window_left: int
    k_scale: float
    v_scale: float
    n_work: int  # work units (one CTA per unit and kv head)
    chunk: int  # tokens per unit of a split request; 0 when nothing was split
    n_partials: int  # partial-result slots the merge combines
    workspace: DecodeWorkspace
    kv_indptr: Any
    kv_indices: Any
    kv_last_page_len: Any
    host_indptr: Any = None
    host_last_page_len: Any = None

    @property
    def lengths(self) -> list[int]:
        """Tokens per request (from the host copies of the page table)."""
        return kv_lengths(self.host_indptr, self.host_last_page_len, self.page_size)

    @property
    def grid(self) -> int:
        """Work units the decode kernel is launched for (the workspace's rows under graphs)."""
        return self.workspace.max_work if self.workspace.graph else self.n_work

    def work_table(self) -> list[tuple[int, int, int, int]]:
        """The planned units ``(request, kv_start, kv_end, slot)``, from the host copy."""
        rows = self.workspace.host_work[: self.n_work].tolist()
        return [tuple(r) for r in rows]


_DTYPES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float8_e4m3fn": "e4m3"}


def _dtype_name(arg: str, dtype: Any, allowed: tuple[str, ...]) -> str:
    name = _DTYPES.get(str(dtype), dtype if isinstance(dtype, str) else None)
    if name not in allowed:
        raise TypeError(f"plan_batch_decode: `{arg}` must be one of {allowed}, got {dtype}")
    return str(name)


def _host_tables(indptr: Any, last: Any, kv_indices: Any) -> tuple[Any, Any]:
    """The page table's indptr and last-page lengths on the host.

    Host tensors pass straight to the planner, which checks their dtype, rank, device and layout
    in C++ (the same messages); device tensors are copied here (a sync). ``kv_indices`` is only
    counted by the planner: its dtype is checked here on the host, or by the decode binding before
    launching.
    """
    tensor = _torch().Tensor
    if type(indptr) is not tensor or indptr.is_cuda:
        indptr = _host_int32("kv_indptr", indptr)
    if type(last) is not tensor or last.is_cuda:
        last = _host_int32("kv_last_page_len", last)
    if type(kv_indices) is not tensor:
        raise TypeError(
            "plan_batch_decode: `kv_indices` must be a torch.Tensor, "
            f"got {type(kv_indices).__name__}"
        )
    if not kv_indices.is_cuda:
        _host_int32("kv_indices", kv_indices)
    return indptr, last


def _host_int32(arg: str, t: Any, ndim: int = 1) -> Any:
    torch = _torch()
    if (
        type(t) is torch.Tensor
        and t.dtype is torch.int32
        and t.device.type == "cpu"
        and t.dim() == ndim
        and t.is_contiguous()
    ):
        return t  # the engine's host copy: the per-step fast path
    if not isinstance(t, torch.Tensor):
        raise TypeError(
            f"plan_batch_decode: `{arg}` must be a torch.Tensor, got {type(t).__name__}"
        )
    if t.dtype != torch.int32:
        raise TypeError(f"plan_batch_decode: `{arg}` must be int32, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"plan_batch_decode: `{arg}` must be {ndim}-D, got shape {list(t.shape)}")
    # NOTE: a device tensor costs a synchronising copy; engines keep host copies of the lengths.
    return t.contiguous() if t.device.type == "cpu" else t.cpu()


def _check_options(  # noqa: PLR0917 (one call site, the public function's own arguments)
    num_qo_heads: Any,
    num_kv_heads: Any,
    head_dim: Any,
    page_size: Any,
    layout: Any,
    window_left: Any,
) -> None:
    fn = "plan_batch_decode"
    if not isinstance(num_kv_heads, int) or num_kv_heads < 1:
        raise ValueError(f"{fn}: `num_kv_heads` must be an int >= 1, got {num_kv_heads!r}")
    if not isinstance(num_qo_heads, int) or num_qo_heads % num_kv_heads != 0:
        raise ValueError(
            f"{fn}: `num_qo_heads` must be a multiple of num_kv_heads={num_kv_heads}, "
            f"got {num_qo_heads!r}"
        )
    group = num_qo_heads // num_kv_heads
    if group > 8:
        raise ValueError(
            f"{fn}: the GQA group (num_qo_heads / num_kv_heads) must be 1-8, got {group}"
        )
    if head_dim not in (64, 128, 256):
        raise ValueError(f"{fn}: `head_dim` must be 64, 128 or 256, got {head_dim!r}")
    if not isinstance(page_size, int) or page_size < 1:
        raise ValueError(f"{fn}: `page_size` must be an int >= 1, got {page_size!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"{fn}: `layout` must be one of {LAYOUTS}, got {layout!r}")
    if not isinstance(window_left, int) or window_left < -1:
        raise ValueError(f"{fn}: `window_left` must be -1 or an int >= 0, got {window_left!r}")


def _check_numbers(
    head_dim: int, sm_scale: Any, logits_soft_cap: Any, k_scale: Any, v_scale: Any
) -> tuple[float, float]:
    fn = "plan_batch_decode"
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"{fn}: `sm_scale` must be finite and > 0, got {sm_scale!r}")
    cap = float(logits_soft_cap)
    if not (cap >= 0 and math.isfinite(cap)):
        raise ValueError(
            f"{fn}: `logits_soft_cap` must be finite and >= 0, got {logits_soft_cap!r}"
        )
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if not (float(s) > 0 and math.isfinite(float(s))):
            raise ValueError(f"{fn}: `{name}` must be finite and > 0, got {s!r}")
    return scale, cap


@api
def plan_batch_decode(
    kv_indptr: Any,
    kv_indices: Any,
    kv_last_page_len: Any,
    *,
    num_qo_heads: int,
    num_kv_heads: int,
    head_dim: int,
    page_size: int,
    workspace: DecodeWorkspace,
    q_dtype: Any = "bf16",
    kv_dtype: Any = None,
    layout: str = "NHD",
    sm_scale: float | None = None,
    logits_soft_cap: float = 0.0,
    window_left: int = -1,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    host_indptr: Any = None,
    host_last_page_len: Any = None,
) -> DecodePlan:
    """Plan one decode step over a paged KV cache (host only; no kernel launch, no compile).

    Parameters
    ----------
    kv_indptr, kv_indices, kv_last_page_len:
        The page table (int32) the decode kernels will read, on the workspace's device; they
        must stay alive and unchanged until the step's ``run`` has executed.
    num_qo_heads, num_kv_heads:
        Query and KV heads; ``num_qo_heads`` a multiple of ``num_kv_heads`` (group 1-8).
    head_dim:
        64, 128 or 256.
    page_size:
        Slots per page, >= 1.
    workspace:
        A :class:`DecodeWorkspace` on the same device; the plan is written into its tables.
    q_dtype, kv_dtype:
        ``bf16`` / ``fp16`` (or the torch dtypes); ``kv_dtype`` also ``e4m3`` (fp8 with per-tensor
        ``k_scale`` / ``v_scale``; NaN encodings in an fp8 cache give unspecified results);
        defaults to ``q_dtype``.
    layout:
        ``NHD`` or ``HND``.
    sm_scale:
        Logit scale, default ``1 / sqrt(head_dim)``.
    logits_soft_cap:
        ``> 0``: logits become ``cap * tanh(logits / cap)``; 0 disables.
    window_left:
        ``-1``: attend to every token; ``w >= 0``: only to the last ``w + 1``.
    host_indptr, host_last_page_len:
        Host copies of the page table's indptr and last-page lengths when the engine keeps them
        (avoids a synchronising device-to-host copy).

    Raises
    ------
    TypeError
        A dtype is unsupported.
    ValueError
        Head counts, head_dim, page size, layout, window, scales or the page table are invalid
        (non-monotonic ``kv_indptr``, a last-page length outside ``[1, page_size]``, more
        requests or work units than the workspace holds).
    """
    fn = "plan_batch_decode"
    if not isinstance(workspace, DecodeWorkspace):
        raise TypeError(
            f"{fn}: `workspace` must be a DecodeWorkspace, got {type(workspace).__name__}"
        )
    if workspace.graph and workspace.device.type == "cuda" and _capturing():
        raise RuntimeError(
            f"{fn}: planning while the stream captures a CUDA graph is refused: plan before "
            "each replay, outside the capture (the graph reads the workspace's tables)"
        )
    # NOTE: an engine plans with the same options every step: validated once, then a dict hit.
    # (the types too: 16.0 == 16 as a key, but only the int is a page size)
    key = (
        num_qo_heads, num_kv_heads, head_dim, page_size, layout, q_dtype, kv_dtype, sm_scale,
        logits_soft_cap, window_left, k_scale, v_scale,
        type(num_qo_heads), type(num_kv_heads), type(head_dim), type(page_size), type(window_left),
    )  # fmt: skip
    try:
        opts = _OPTIONS.get(key)
    except TypeError:  # an unhashable argument: let the checks below name it
        opts = None
    if opts is None:
        _check_options(num_qo_heads, num_kv_heads, head_dim, page_size, layout, window_left)
        qd = _dtype_name("q_dtype", q_dtype, ("bf16", "fp16"))
        kd = qd if kv_dtype is None else _dtype_name("kv_dtype", kv_dtype, ("bf16", "fp16", "e4m3"))
        if kd not in ("e4m3", qd):
            raise TypeError(f"{fn}: `kv_dtype` must be q_dtype ({qd}) or e4m3, got {kd}")
        scale, cap = _check_numbers(head_dim, sm_scale, logits_soft_cap, k_scale, v_scale)
        opts = (qd, kd, scale, cap, float(k_scale), float(v_scale))
        if len(_OPTIONS) < 1024:
            _OPTIONS[key] = opts
    qd, kd, scale, cap, ks, vs = opts
    if num_qo_heads != workspace.num_qo_heads or head_dim != workspace.head_dim:
        raise ValueError(
            f"{fn}: the workspace was made for num_qo_heads={workspace.num_qo_heads}, "
            f"head_dim={workspace.head_dim}; got {num_qo_heads}, {head_dim}"
        )
    indptr, last = _host_tables(
        kv_indptr if host_indptr is None else host_indptr,
        kv_last_page_len if host_last_page_len is None else host_last_page_len,
        kv_indices,
    )
    batch = len(last) if last.dim() == 1 else -1
    if batch > workspace.max_batch:
        raise ValueError(
            f"{fn}: the batch has {batch} requests but the workspace holds {workspace.max_batch}"
        )
    mod, wave = workspace.wave(qd, kd, head_dim, num_qo_heads // num_kv_heads)
    if mod is not None:  # wait for the last upload, plan, upload, in one call
        packed = mod.plan_upload(
            indptr, last, workspace.host_tables, workspace.tables, workspace.max_work, page_size,
            num_kv_heads, window_left, wave, MIN_CHUNK, kv_indices.shape[0], workspace.event,
        )  # fmt: skip
    else:
        packed = _planner().plan(
            indptr, last, workspace.host_work, workspace.host_merge, page_size, num_kv_heads,
            window_left, wave, MIN_CHUNK, workspace.max_work, kv_indices.shape[0],
        )  # fmt: skip
    n_work, n_partials, chunk = packed & 0xFFFF, (packed >> 16) & 0xFFFF, packed >> 32
    # NOTE: positional (the field order of DecodePlan): faster than keywords, once per step.
    return DecodePlan(
        batch, num_qo_heads, num_kv_heads, head_dim, page_size, layout, qd, kd, scale, cap,
        window_left, ks, vs, n_work, chunk, n_partials, workspace, kv_indptr, kv_indices,
        kv_last_page_len, indptr, last,
    )  # fmt: skip


def _split_cache(kv_cache: Any, layout: str, fn: str = "ember.batch_decode") -> tuple[Any, Any]:
    torch = _torch()
    if isinstance(kv_cache, tuple | list):
        if len(kv_cache) != 2:
            raise ValueError(
                f"{fn}: `kv_cache` as a sequence must be (k, v), got {len(kv_cache)} items"
            )
        return kv_cache[0], kv_cache[1]
    if not isinstance(kv_cache, torch.Tensor):
        raise TypeError(
            f"{fn}: `kv_cache` must be a tensor or a (k, v) pair, got {type(kv_cache).__name__}"
        )
    if kv_cache.dim() != 5 or kv_cache.shape[1] != 2:
        want = (
            "[pages, 2, page_size, kv_heads, head_dim]"
            if layout == "NHD"
            else ("[pages, 2, kv_heads, page_size, head_dim]")
        )
        raise ValueError(f"{fn}: `kv_cache` must be {want} ({layout}), got {list(kv_cache.shape)}")
    return kv_cache[:, 0], kv_cache[:, 1]


@trace(BATCH_DECODE)
@api
def batch_decode(
    q: Any, kv_cache: Any, plan: DecodePlan, *, out: Any = None, return_lse: bool = False
) -> Any:
    """Decode attention for one new token per request, over the paged KV cache of ``plan``.

    Only launches (the decode kernel, then the merge of split requests, on the current stream):
    no synchronisation and no compilation once the module is loaded; with ``out`` given and
    ``return_lse`` false it allocates nothing, so it can be captured in a CUDA graph.

    Parameters
    ----------
    q:
        ``[batch, num_qo_heads, head_dim]`` in the plan's ``q_dtype``; rows may be strided (the
        start and every stride but the last 16-byte aligned), the last dimension contiguous.
    kv_cache:
        ``[pages, 2, page_size, kv_heads, head_dim]`` (``NHD``) or ``[pages, 2, kv_heads,
        page_size, head_dim]`` (``HND``) in ``kv_dtype``, or a ``(k, v)`` pair of the per-K/V
        shapes.
    plan:
        From :func:`plan_batch_decode` for this step.
    out:
        Optional ``q``-shaped output.
    return_lse:
        Also return the log-sum-exp of the logits (natural log, fp32 ``[batch, num_qo_heads]``).

    Returns
    -------
    ``out``, or ``(out, lse)`` with ``return_lse``.
    """
    torch = _torch()
    if not isinstance(plan, DecodePlan):
        raise TypeError(
            f"ember.batch_decode: `plan` must be a DecodePlan, got {type(plan).__name__}"
        )
    k, v = _split_cache(kv_cache, plan.layout)
    group = plan.num_qo_heads // plan.num_kv_heads
    mod = _decode_module(plan.q_dtype, plan.kv_dtype, plan.head_dim, group)
    if out is None:
        out = torch.empty_like(q)
    lse = None
    if return_lse:
        lse = torch.empty(q.shape[0], plan.num_qo_heads, dtype=torch.float32, device=q.device)
    ws = plan.workspace
    merge_rows = q.shape[0] if ws.graph else (plan.batch if plan.n_partials else 0)
    mod.run(
        q,
        k,
        v,
        plan.kv_indptr,
        plan.kv_indices,
        ws.work,
        ws.merge_indptr,
        ws.partial_o,
        ws.partial_lse,
        out,
        lse,
        plan.grid,
        merge_rows,
        plan.page_size,
        plan.layout == "HND",
        plan.sm_scale,
        plan.logits_soft_cap,
        plan.k_scale,
        plan.v_scale,
    )
    return (out, lse) if return_lse else out


@trace(SINGLE_DECODE)
@api
def single_decode(
    q: Any,
    k: Any,
    v: Any,
    *,
    layout: str = "NHD",
    sm_scale: float | None = None,
    logits_soft_cap: float = 0.0,
    window_left: int = -1,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    return_lse: bool = False,
) -> Any:
    """Decode attention for one request over contiguous K and V (a convenience, not for graphs).

    ``q`` is ``[num_qo_heads, head_dim]``; ``k``/``v`` are ``[tokens, kv_heads, head_dim]``
    (``NHD``) or ``[kv_heads, tokens, head_dim]`` (``HND``). The cache is viewed as one page of
    ``tokens`` slots and planned and run like a batch of one, so the results are those of
    :func:`batch_decode`; the plan and a small workspace are made per call.
    """
    torch = _torch()
    fn = "ember.single_decode"
    if layout not in LAYOUTS:
        raise ValueError(f"{fn}: `layout` must be one of {LAYOUTS}, got {layout!r}")
    if q.dim() != 2:
        raise ValueError(f"{fn}: `q` must be [num_qo_heads, head_dim], got {list(q.shape)}")
    if k.dim() != 3 or k.shape != v.shape:
        raise ValueError(
            f"{fn}: `k` and `v` must be 3-D of one shape, got {list(k.shape)} and {list(v.shape)}"
        )
    tokens, kv_heads = (k.shape[0], k.shape[1]) if layout == "NHD" else (k.shape[1], k.shape[0])
    if tokens < 1:
        raise ValueError(f"{fn}: `k` must hold at least one token, got {list(k.shape)}")
    hq, dim = q.shape
    i32 = torch.int32
    indptr = torch.tensor([0, 1], dtype=i32)
    last = torch.tensor([tokens], dtype=i32)
    ws = DecodeWorkspace(q.device, max_batch=1, num_qo_heads=hq, head_dim=dim)
    plan = plan_batch_decode(
        indptr.to(q.device),
        torch.zeros(1, dtype=i32, device=q.device),
        last.to(q.device),
        num_qo_heads=hq,
        num_kv_heads=kv_heads,
        head_dim=dim,
        page_size=tokens,
        workspace=ws,
        q_dtype=q.dtype,
        kv_dtype=k.dtype,
        layout=layout,
        sm_scale=sm_scale,
        logits_soft_cap=logits_soft_cap,
        window_left=window_left,
        k_scale=k_scale,
        v_scale=v_scale,
        host_indptr=indptr,
        host_last_page_len=last,
    )
    res = batch_decode(q[None], (k[None], v[None]), plan, return_lse=return_lse)
    if return_lse:
        return res[0][0], res[1][0]
    return res[0]

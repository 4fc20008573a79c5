"""Trace templates (R3.14-R3.17, R8.11): what each public op computes, in the FlashInfer Trace
schema that flashinfer-bench reads.

A :class:`TraceTemplate` names an op's axes (``const``: fixed per definition, e.g. the hidden
size; ``var``: bound at run time, e.g. the batch), its inputs and outputs (axis names + dtype),
constraints between axes, and a pure-torch reference whose parameters are the input names. One
template describes a *family* of definitions: each realistic model shape (:data:`MODELS`) binds
the const axes and gives one definition, e.g. ``rmsnorm_h4096``. ``ember trace generate`` writes
them to ``definitions/<name>.json`` (committed); ``tests/unit/test_sync.py`` regenerates them and
fails on any difference.

:func:`trace` attaches a template to a public op (``ember.rmsnorm.trace``); for a plan/run API it
goes on the method that runs (R3.15: ``batch_decode``). With ``EMBER_TRACE_DUMP=1`` (read at
``import ember``, like the log level) every traced op appends one flashinfer-bench workload record
per distinct binding of its var axes (:mod:`ember.trace.capture`).
"""

from __future__ import annotations

import inspect
import json
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

__all__ = [
    "MODELS",
    "Axis",
    "Model",
    "Tensor",
    "TraceTemplate",
    "definitions",
    "reference_source",
    "trace",
    "write_definitions",
]

F = TypeVar("F", bound=Callable[..., Any])

DTYPES = frozenset(
    {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1"}
    | {"int64", "int32", "int16", "int8", "bool"}
)
"""The dtypes of flashinfer-bench's ``DType`` enum."""


@dataclass(frozen=True)
class Axis:
    """A named dimension: ``const`` (bound by each example) or ``var`` (bound at run time)."""

    kind: Literal["const", "var"]
    description: str


@dataclass(frozen=True)
class Tensor:
    """An input or output: its axis names (``None``: a scalar) and dtype."""

    shape: tuple[str, ...] | None
    dtype: str
    description: str | None = None


@dataclass(frozen=True)
class Model:
    """The shape parameters of one model that the examples draw from."""

    tag: str
    hidden_size: int
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int


MODELS: tuple[Model, ...] = (
    Model("llama-3-8b", 4096, 32, 8, 128, 14336, 128256),
    Model("llama-3-70b", 8192, 64, 8, 128, 28672, 128256),
    Model("qwen3-32b", 5120, 64, 8, 128, 25600, 151936),
    Model("mixtral-8x7b", 4096, 32, 8, 128, 14336, 32000),
)
"""Realistic shapes (R3.16): Llama-3-8B/70B, Qwen3-32B and Mixtral-8x7B (an expert's MLP)."""


@dataclass(frozen=True)
class TraceTemplate:
    """What one public op computes, in the FlashInfer Trace schema.

    ``name`` is a format string over the const axes (``"rmsnorm_h{hidden_size}"``); ``bind`` maps
    a :class:`Model` to the const axes' values; ``reference`` is a self-contained pure-torch
    function (imports inside) whose parameter names are the input names, in order, returning the
    outputs in order.
    """

    op: str
    name: str
    op_type: str
    description: str
    axes: Mapping[str, Axis]
    inputs: Mapping[str, Tensor]
    outputs: Mapping[str, Tensor]
    reference: Callable[..., Any]
    bind: Callable[[Model], dict[str, int]]
    constraints: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    via: tuple[str, ...] = ()
    """Other public functions whose parameters the inputs may name: the plan of a plan/run op
    (R3.15), or the op an in-place variant forwards ``**kwargs`` to."""
    opaque: tuple[str, ...] = ()
    """Required parameters that carry no tensor of the definition (a plan/run op's ``plan``)."""
    untraced: tuple[str, ...] = ()
    """Parameters (of the op or of ``via``) the definition does not carry: run-time controls
    (``check``, ``seed``, ``offset``, ``generator``, ``return_lse``), layouts, and options the
    definition fixes at their defaults (its reference computes the default). ember-side only:
    not written to the definition. With the inputs, ``opaque`` and the output buffers (``out``,
    ``out_*``), they must account for every parameter of the op (``tests/unit/test_sync.py``)."""
    small: Mapping[str, int] = field(default_factory=dict)
    """Small values of every axis, for the CPU and GPU reference tests."""

    def examples(self) -> dict[str, tuple[dict[str, int], list[str]]]:
        """``{definition name: (const axes, model tags)}``; models with equal shapes share one."""
        out: dict[str, tuple[dict[str, int], list[str]]] = {}
        for model in MODELS:
            consts = self.bind(model)
            name = self.name.format(**consts)
            out.setdefault(name, (consts, []))[1].append(f"model:{model.tag}")
        return out

    def definition(self, consts: Mapping[str, int], model_tags: list[str]) -> dict[str, Any]:
        """One definition as flashinfer-bench's ``Definition`` JSON (its field names and order)."""
        axes: dict[str, Any] = {}
        for name, ax in self.axes.items():
            if ax.kind == "const":
                axes[name] = {"type": "const", "value": consts[name], "description": ax.description}
            else:
                axes[name] = {"type": "var", "description": ax.description}
        return {
            "name": self.name.format(**consts),
            "description": self.description,
            "op_type": self.op_type,
            "tags": [f"ember:{self.op}", *self.tags, *model_tags],
            "axes": axes,
            "constraints": list(self.constraints),
            "inputs": {k: _tensor_json(t) for k, t in self.inputs.items()},
            "outputs": {k: _tensor_json(t) for k, t in self.outputs.items()},
            "reference": reference_source(self.reference),
        }


def _tensor_json(t: Tensor) -> dict[str, Any]:
    out: dict[str, Any] = {"shape": None if t.shape is None else list(t.shape), "dtype": t.dtype}
    if t.description is not None:
        out["description"] = t.description
    return out


def reference_source(fn: Callable[..., Any]) -> str:
    """``fn``'s source, dedented, renamed to ``run`` (the name flashinfer-bench calls), after the
    one import its annotations need: the text runs on its own."""
    src = textwrap.dedent(inspect.getsource(fn))
    head = f"def {fn.__name__}("
    if head not in src:
        raise ValueError(f"reference {fn.__qualname__} is not a plain `def` (decorated or lambda)")
    return "from typing import Any\n\n\n" + src.replace(head, "def run(", 1)


def trace(template: TraceTemplate) -> Callable[[F], F]:
    """Attach ``template`` as ``fn.trace`` (R3.14); put it above ``@api``.

    The attribute is set on the function and on what ``@api`` wrapped, so ``ember.<op>.trace``
    works at every log level. With ``EMBER_TRACE_DUMP`` on at decoration time, the call is also
    wrapped to record workloads; off, ``fn`` itself is returned (no cost).
    """

    def decorate(fn: F) -> F:
        fn.trace = template  # type: ignore[attr-defined]
        inspect.unwrap(fn).trace = template
        from ember.config import knobs

        if not knobs.trace_dump:
            return fn
        from ember.trace.capture import recording

        return recording(fn, template)

    return decorate


def definitions() -> Iterator[tuple[TraceTemplate, dict[str, Any]]]:
    """Every public op's template and each of its definitions (JSON-ready)."""
    from ember.trace.templates import TEMPLATES

    for template in TEMPLATES:
        for consts, tags in template.examples().values():
            yield template, template.definition(consts, tags)


def write_definitions(out: Path) -> list[Path]:
    """Write ``<out>/<name>.json`` for every definition; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for _, d in definitions():
        path = out / f"{d['name']}.json"
        if path in written:
            raise ValueError(f"two definitions are named {d['name']!r}")
        path.write_text(json.dumps(d, indent=2) + "\n")
        written.append(path)
    return written

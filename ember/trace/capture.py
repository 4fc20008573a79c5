"""Workload capture (R3.16): ``EMBER_TRACE_DUMP=1`` records what the traced ops are called with.

Each call binds the template's axes from its tensors' shapes; the first call with a new binding
of the var axes (per definition and process) appends one line to
``<EMBER_TRACE_DIR>/workloads/<op_type>/<definition>.jsonl``: a flashinfer-bench workload trace,
``{"definition", "workload": {"axes", "inputs", "uuid"}, "solution": null, "evaluation": null}``
with tensors as ``{"type": "random"}`` and scalars as ``{"type": "scalar", "value": ...}``. A call
whose arguments do not bind (a ``(k, v)`` cache pair, a scalar where a tensor is declared) is
skipped with a debug message; capture never makes a call fail.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ember.trace import TraceTemplate

__all__ = ["recording", "workload_record"]

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

_SEEN: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
_LOCK = threading.Lock()


def recording(fn: F, template: TraceTemplate) -> F:
    """``fn`` wrapped to record each new workload before it runs (like the API log, R6.1)."""
    sig = inspect.signature(inspect.unwrap(fn))

    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            _record(template, dict(bound.arguments))
        except Exception as e:  # NOTE: capture is best effort: it never fails a call
            log.debug("ember.trace: %s not recorded: %s", template.op, e)
        return fn(*args, **kwargs)

    return traced  # type: ignore[return-value]


def _values(template: TraceTemplate, arguments: dict[str, Any]) -> dict[str, Any]:
    """Input name -> value: an argument, or an attribute of an opaque one (the plan)."""
    out = {}
    for name in template.inputs:
        if name in arguments:
            out[name] = arguments[name]
            continue
        for holder in template.opaque:
            if hasattr(arguments.get(holder), name):
                out[name] = getattr(arguments[holder], name)
                break
    return out


def workload_record(template: TraceTemplate, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The workload trace of a call (``arguments``: parameter -> value); None if unbound."""
    values = _values(template, arguments)
    axes: dict[str, int] = {}
    inputs: dict[str, Any] = {}
    for name, spec in template.inputs.items():
        value = values.get(name)
        if spec.shape is None:
            if not isinstance(value, bool | int | float):
                return None
            inputs[name] = {"type": "scalar", "value": value}
            continue
        shape = getattr(value, "shape", None)
        if shape is None or len(shape) != len(spec.shape):
            return None
        for ax, n in zip(spec.shape, shape, strict=True):
            if axes.setdefault(ax, int(n)) != int(n):
                return None
        inputs[name] = {"type": "random"}
    if set(axes) != set(template.axes):
        return None
    consts = {k: v for k, v in axes.items() if template.axes[k].kind == "const"}
    var = {k: v for k, v in axes.items() if template.axes[k].kind == "var"}
    return {
        "definition": template.name.format(**consts),
        "workload": {"axes": var, "inputs": inputs, "uuid": str(uuid.uuid4())},
        "solution": None,
        "evaluation": None,
    }


def trace_dir() -> Path:
    from ember.config import knobs

    return knobs.trace_dir or knobs.cache_dir / "traces"


def _record(template: TraceTemplate, arguments: dict[str, Any]) -> None:
    rec = workload_record(template, arguments)
    if rec is None:
        log.debug("ember.trace: %s: arguments do not bind the template's axes", template.op)
        return
    key = (rec["definition"], tuple(sorted(rec["workload"]["axes"].items())))
    with _LOCK:
        if key in _SEEN:
            return
        _SEEN.add(key)
        path = trace_dir() / "workloads" / template.op_type / f"{rec['definition']}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

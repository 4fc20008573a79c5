"""Dumps of API calls at ``EMBER_LOGLEVEL=10``, and ``ember replay`` (R6.6-R6.9, R6.12).

A dump is a directory ``<EMBER_DUMP_DIR>/<api>-<pid>-<seq>/`` holding

- ``inputs.safetensors``: every tensor argument (copied to the host, made contiguous) as
  ``arg.<name>`` (``arg.<name>.<i>`` inside tuples and lists, ``arg.<name>.<field>`` in
  NamedTuples), written *before* the call;
- ``outputs.safetensors``: the returned tensors (``return``, ``return.<i>``) and the value every
  tensor argument holds after the call (``arg.<name>``, which captures in-place ops);
- ``meta.json``: the API and its import path, every argument (non-tensor values as JSON, or
  ``{"type", "repr", "replayable": false}``), each tensor's shape, dtype, strides, storage offset
  and device, the device's name and arch, the ember version, the modules the process loaded
  (uri, key, targets, flags), the non-default knobs, notes from the op, and the call's status
  (``called`` until it returns: a dump left in that state is the call that crashed).

Dumps are bounded per process, exactly: at most ``EMBER_DUMP_MAX_COUNT`` of them and
``EMBER_DUMP_MAX_BYTES`` tensor bytes in all. A dump whose inputs would pass either bound is not
written; one whose outputs would pass the byte bound keeps its inputs and records why its
outputs are missing. ``EMBER_DUMP_INCLUDE`` / ``EMBER_DUMP_EXCLUDE`` (fnmatch patterns on the API
name, exclude wins) choose the APIs; only the outermost of nested public calls is dumped; nothing
is dumped while a CUDA graph is captured.
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ember._version import __version__
from ember.config import knobs
from ember.errors import EmberError

__all__ = [
    "Dump",
    "NotReplayableError",
    "begin",
    "dump_root",
    "load_meta",
    "replay",
    "reset_budget",
]

FORMAT = "ember-dump-1"
_LOCK = threading.Lock()
_USED = {"pid": -1, "count": 0, "bytes": 0}


def _tensor_type() -> Any:
    import torch

    return torch.Tensor


class _Encoder:
    """Arguments -> JSON, with the tensors set aside by name (aliases kept as one tensor)."""

    def __init__(self) -> None:
        self.tensors: dict[str, Any] = {}
        self._names: dict[int, str] = {}
        self.replayable = True

    def encode(self, name: str, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            if id(value) in self._names:  # e.g. rmsnorm(x, w, out=x): one tensor on replay too
                return {"tensor": self._names[id(value)]}
            self._names[id(value)] = name
            self.tensors[name] = value
            return {"tensor": name}
        if value is None or isinstance(value, bool | int | str):
            return {"value": value}
        if isinstance(value, float):
            return {"float": repr(value)}  # NOTE: repr round-trips, and keeps nan/inf out of JSON
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            cls = type(value)
            fields = {k: self.encode(f"{name}.{k}", getattr(value, k)) for k in value._fields}
            return {"namedtuple": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
        if isinstance(value, tuple | list):
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {kind: [self.encode(f"{name}.{i}", v) for i, v in enumerate(value)]}
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"dict": {k: self.encode(f"{name}.{k}", v) for k, v in value.items()}}
        self.replayable = False
        cls = type(value)
        return {
            "type": f"{cls.__module__}.{cls.__qualname__}",
            "repr": repr(value)[:300],
            "replayable": False,
        }


def _tensor_meta(t: Any) -> dict[str, Any]:
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "strides": list(t.stride()),
        "storage_offset": int(t.storage_offset()),
        "device": str(t.device),
        "contiguous": bool(t.is_contiguous()),
    }


def _nbytes(tensors: dict[str, Any]) -> int:
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors.values())


def _host_copies(tensors: dict[str, Any]) -> dict[str, Any]:
    return {k: t.detach().to("cpu", copy=True).contiguous() for k, t in tensors.items()}


def _save(path: Path, tensors: dict[str, Any], api_name: str) -> None:
    from safetensors.torch import save_file

    tmp = path.with_name(f".{path.name}.tmp")
    save_file(_host_copies(tensors), str(tmp), metadata={"format": FORMAT, "api": api_name})
    os.replace(tmp, path)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _devices(tensors: dict[str, Any]) -> dict[str, Any]:
    """Name and compute capability of every CUDA device a tensor is on (R6.12)."""
    found: dict[str, Any] = {}
    for t in tensors.values():
        if t.device.type == "cuda" and str(t.device) not in found:
            import torch

            props = torch.cuda.get_device_properties(t.device)
            found[str(t.device)] = {
                "name": props.name,
                "arch": f"{props.major}.{props.minor}",
                "torch_cuda": torch.version.cuda,
            }
    return found


def _non_default_knobs() -> dict[str, str]:
    """Every knob not at its default: the controls a reproduction must repeat (R6.16)."""
    snapshot = knobs.snapshot().items()
    return {env: str(value) for env, (_n, value, source) in snapshot if source != "default"}


def _selected(api_name: str) -> str | None:
    """Why ``api_name`` is not dumped (the include/exclude filters), or ``None``."""
    if any(fnmatch.fnmatchcase(api_name, p) for p in knobs.dump_exclude):
        return "matches EMBER_DUMP_EXCLUDE"
    include = knobs.dump_include
    if include and not any(fnmatch.fnmatchcase(api_name, p) for p in include):
        return "does not match EMBER_DUMP_INCLUDE"
    return None


def _over_bytes(nbytes: int) -> str | None:
    cap = knobs.dump_max_bytes
    if _USED["bytes"] + nbytes <= cap:
        return None
    return f"{nbytes} more bytes would pass EMBER_DUMP_MAX_BYTES={cap} ({_USED['bytes']} used)"


def _reserve(nbytes: int, *, new_dump: bool) -> str | None:
    """Count ``nbytes`` (and a new dump) against the per-process bounds, or say why they do not
    fit."""
    with _LOCK:
        if _USED["pid"] != os.getpid():  # a forked child starts its own budget
            _USED.update(pid=os.getpid(), count=0, bytes=0)
        limit = knobs.dump_max_count
        if new_dump and _USED["count"] >= limit:
            return f"EMBER_DUMP_MAX_COUNT={limit} dumps reached"
        why = _over_bytes(nbytes)
        if why is None:
            _USED["count"] += int(new_dump)
            _USED["bytes"] += nbytes
        return why


def reset_budget() -> None:
    """Forget the dumps this process has counted against the bounds (for tests)."""
    with _LOCK:
        _USED.update(pid=os.getpid(), count=0, bytes=0)


def dump_root() -> Path:
    """``EMBER_DUMP_DIR``, else ``<EMBER_CACHE_DIR>/dumps`` (R6.9)."""
    return knobs.dump_dir or knobs.cache_dir / "dumps"


class Dump:
    """A dump in progress: inputs and metadata written; :meth:`finish` adds the outputs."""

    def __init__(self, path: Path, meta: dict[str, Any], arg_tensors: dict[str, Any]) -> None:
        self.path, self.meta, self.arg_tensors = path, meta, arg_tensors
        self.t0 = time.perf_counter()

    def _close(self, status: str, modules: list[dict[str, Any]], notes: dict[str, Any]) -> None:
        self.meta["status"] = status
        self.meta["seconds"] = round(time.perf_counter() - self.t0, 6)
        self.meta["modules"]["loaded_during_call"] = modules
        self.meta["notes"] = {k: repr(v) for k, v in notes.items()}
        _write_json(self.path / "meta.json", self.meta)

    def finish(self, result: Any, modules: list[dict[str, Any]], notes: dict[str, Any]) -> str:
        """Write the outputs (unless over the byte bound) and the final metadata."""
        enc = _Encoder()
        self.meta["result"] = enc.encode("return", result)
        outputs = dict(enc.tensors)
        outputs.update(self.arg_tensors)  # their values after the call
        nbytes = _nbytes(outputs)
        why = _reserve(nbytes, new_dump=False)
        if why is None:
            _save(self.path / "outputs.safetensors", outputs, self.meta["api"])
            self.meta["outputs"] = {k: _tensor_meta(t) for k, t in outputs.items()}
            self.meta["bytes"] += nbytes
            said = f"dump complete: {self.path}"
        else:
            self.meta["outputs"] = None
            self.meta["outputs_skipped"] = why
            said = f"dump outputs skipped ({why}): {self.path}"
        self._close("returned", modules, notes)
        return said

    def finish_raised(
        self, exc: BaseException, modules: list[dict[str, Any]], notes: dict[str, Any]
    ) -> None:
        self.meta["raised"] = {"type": type(exc).__name__, "message": str(exc)}
        self._close("raised", modules, notes)


def begin(
    api_name: str,
    fn: Callable[..., Any],
    seq: int,
    arguments: dict[str, Any],
    *,
    capturing: bool,
    level: int,
) -> tuple[Dump | None, str]:
    """Write the inputs of a call about to run; ``(None, why)`` when it is not dumped."""
    if capturing:
        return None, "dump skipped: CUDA graph capture"
    why = _selected(api_name)
    if why is not None:
        return None, f"dump skipped: {api_name} {why}"
    enc = _Encoder()
    args = {k: enc.encode(f"arg.{k}", v) for k, v in arguments.items()}
    nbytes = _nbytes(enc.tensors)
    why = _reserve(nbytes, new_dump=True)
    if why is not None:
        return None, f"dump skipped: {why}"
    from ember.jit.build import loaded_modules

    path = dump_root() / f"{api_name}-{os.getpid()}-{seq}"
    path.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "api": api_name,
        "function": f"{fn.__module__}:{fn.__qualname__}",
        "arguments": args,
        "replayable": enc.replayable,
        "inputs": {k: _tensor_meta(t) for k, t in enc.tensors.items()},
        "outputs": None,
        "status": "called",
        "bytes": nbytes,
        "devices": _devices(enc.tensors),
        "ember": __version__,
        "loglevel": level,
        "knobs": _non_default_knobs(),
        "modules": {"loaded_in_process": loaded_modules(), "loaded_during_call": []},
        "notes": {},
        "pid": os.getpid(),
        "seq": seq,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _save(path / "inputs.safetensors", enc.tensors, api_name)
    _write_json(path / "meta.json", meta)
    return Dump(path, meta, enc.tensors), f"dump inputs written: {path}"


# --- replay -------------------------------------------------------------------------------------


class NotReplayableError(EmberError):
    """The dump cannot be re-run here; the message says why."""


def load_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotReplayableError(f"{path} holds no readable meta.json ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise NotReplayableError(f"{path}/meta.json is not an ember dump (format {FORMAT})")
    return meta


def _import(path: str) -> Callable[..., Any]:
    module, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return inspect.unwrap(obj)  # type: ignore[no-any-return]


class _Decoder:
    def __init__(self, inputs: dict[str, Any], meta: dict[str, Any], device: str | None) -> None:
        self.inputs, self.meta, self.device = inputs, meta, device
        self.tensors: dict[str, Any] = {}

    def tensor(self, name: str) -> Any:
        import torch

        if name in self.tensors:
            return self.tensors[name]
        info = self.meta["inputs"][name]
        where = info["device"]
        if self.device is not None and where != "cpu":
            where = self.device  # host tensors (e.g. a plan's page-table copies) stay on the host
        data = self.inputs[name]
        # NOTE: the recorded strides, not the dump's contiguous copy: layout bugs replay too.
        t = torch.empty_strided(info["shape"], info["strides"], dtype=data.dtype, device=where)
        try:
            t.copy_(data)
        except RuntimeError:  # overlapping strides (an expanded view): a dense copy instead
            t = data.to(where)
        self.tensors[name] = t
        return t

    def decode(self, spec: dict[str, Any]) -> Any:
        import torch

        if "tensor" in spec:
            return self.tensor(spec["tensor"])
        if "value" in spec:
            return spec["value"]
        if "float" in spec:
            return float(spec["float"])
        if "dtype" in spec:
            return getattr(torch, spec["dtype"])
        if "device" in spec:
            return torch.device(spec["device"])
        if "tuple" in spec:
            return tuple(self.decode(s) for s in spec["tuple"])
        if "list" in spec:
            return [self.decode(s) for s in spec["list"]]
        if "dict" in spec:
            return {k: self.decode(s) for k, s in spec["dict"].items()}
        if "namedtuple" in spec:
            cls = _import(spec["namedtuple"])
            return cls(**{k: self.decode(s) for k, s in spec["fields"].items()})
        raise NotReplayableError(f"an argument of type {spec.get('type')} ({spec.get('repr')})")


# Default tolerances per dtype (rtol, atol), as torch.testing.assert_close's.
TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _compare(name: str, want: Any, got: Any, rtol: float | None, atol: float | None) -> str | None:
    """``None`` when ``got`` matches ``want``, else what differs."""
    import torch

    if got is None:
        return "missing from the replay's results"
    if list(got.shape) != list(want.shape) or got.dtype != want.dtype:
        return f"got {got.dtype} {list(got.shape)}, recorded {want.dtype} {list(want.shape)}"
    got = got.detach().cpu()
    if not want.is_floating_point():
        bad = int((got != want).sum())
        return None if bad == 0 else f"{bad} of {want.numel()} elements differ (exact compare)"
    r, a = TOLERANCES.get(str(want.dtype).removeprefix("torch."), (1.6e-2, 1e-5))
    r, a = (r if rtol is None else rtol), (a if atol is None else atol)
    w, g = want.double(), got.double()
    close = torch.isclose(g, w, rtol=r, atol=a, equal_nan=True)
    if bool(close.all()):
        return None
    diff = (g - w).abs().nan_to_num(nan=float("inf"))
    return (
        f"{int((~close).sum())} of {want.numel()} elements differ beyond rtol={r:g} atol={a:g} "
        f"(max abs diff {float(diff.max()):.6g})"
    )


def replay(
    path: Path,
    *,
    device: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    report: Callable[[str], None] = print,
) -> int:
    """Re-run a dumped call and compare with its recorded outputs.

    Returns 0 when every recorded output matches (or, for a dump whose call raised, the replay
    raises the same exception type), 1 on a mismatch, 2 when the dump cannot be replayed.
    """
    from safetensors.torch import load_file

    try:
        meta = load_meta(path)
        if not meta.get("replayable", False):
            bad = [k for k, v in meta["arguments"].items() if v.get("replayable") is False]
            raise NotReplayableError(f"argument(s) {bad} were recorded by type and repr only")
        fn = _import(meta["function"])
        inputs = load_file(str(path / "inputs.safetensors"))
        dec = _Decoder(inputs, meta, device)
        arguments = {k: dec.decode(v) for k, v in meta["arguments"].items()}
        bound = inspect.BoundArguments(inspect.signature(fn), arguments)
    except NotReplayableError as exc:
        report(f"not replayable: {exc}")
        return 2
    except (ImportError, AttributeError, OSError, KeyError, RuntimeError) as exc:
        report(f"not replayable: {type(exc).__name__}: {exc}")
        return 2
    report(f"replaying {meta['api']} ({meta['function']}) from {path}")
    try:
        result = fn(*bound.args, **bound.kwargs)
    except Exception as exc:
        recorded = meta.get("raised")
        report(f"replay raised {type(exc).__name__}: {exc}")
        if recorded and recorded["type"] == type(exc).__name__:
            report(f"the recorded call raised it too ({recorded['message']}): match")
            return 0
        return 1
    if meta.get("raised"):
        report(f"the recorded call raised {meta['raised']['type']}; the replay returned: mismatch")
        return 1
    if not meta.get("outputs"):
        why = meta.get("outputs_skipped") or f"the recorded call never returned ({meta['status']})"
        report(f"ran without error; nothing to compare: {why}")
        return 0
    recorded = load_file(str(path / "outputs.safetensors"))
    enc = _Encoder()
    enc.encode("return", result)
    got = dict(enc.tensors)
    got.update(dec.tensors)
    failed = 0
    for name in sorted(recorded):
        problem = _compare(name, recorded[name], got.get(name), rtol, atol)
        report(f"  {name}: {'match' if problem is None else 'MISMATCH: ' + problem}")
        failed += problem is not None
    report(f"{len(recorded) - failed}/{len(recorded)} output(s) match")
    return 1 if failed else 0

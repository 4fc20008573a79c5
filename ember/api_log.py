"""API call logging (R6.1-R6.5, R3.15): one decorator on every public op, written before launch.

``@api`` marks a public function (or the method of a plan/run class that launches) and, depending
on ``EMBER_LOGLEVEL`` *at the time the function is decorated* (``import ember``), returns:

- level 0: the function itself. No wrapper, so logging that is off costs nothing (R6.2);
- level 1: a wrapper that writes ``[ember.api pid=P #N] <api name>`` and flushes it, then calls;
- level 3: also one line per argument (tensors: shape, dtype, strides, device, contiguity;
  scalars: their repr; other objects: type and a short summary), and after the call the results;
- level 5: also statistics of floating tensors (min, max, mean over finite elements, NaN and Inf
  counts; integers: min, max) before and after the call, skipped with a note while the current
  CUDA stream captures a graph (R6.4, R6.5);
- level 10: also a dump of the call (:mod:`ember.api_dump`) that ``ember replay`` re-runs.

Every line of a call is written to ``EMBER_LOGDEST`` and flushed *before* the function runs, so
the parameters of a call that kills the process survive it (R6.1). Lines go straight to the
destination, not through :mod:`logging`, which applications reconfigure; the JIT and loader
messages have their own logger (``ember.jit``) and level (``EMBER_JIT_LOGLEVEL``, R7.8).

How a line reaches the destination:

- ``stderr``/``stdout``: written to the stream and flushed;
- a path without ``%p`` (several processes may share it): ``os.write`` with ``O_APPEND``, one
  system call per write;
- a path with ``%p`` (the file of one process): copied into a shared memory map of the file
  (``MAP_SHARED``), no system call. A copied line is in the page cache, so it survives the
  process dying in the next instruction (SIGKILL, abort, a segfault) as an ``os.write`` would;
  only losing the machine loses it, as with ``os.write``. The file is grown in steps (1 MiB, then by
  its size, at most 64 MiB at a time) with its blocks reserved, and trimmed to the lines at exit
  (``atexit``). Until then, and for good after a crash or ``os._exit`` (e.g. a forked
  ``multiprocessing`` worker), it ends in NUL padding: ``tr -d '\\0' < api-4242.log`` strips it;
  ``tail -f`` does not follow it while the process runs. A forked child maps a file of its own;
  threads reserve their bytes under a lock, so lines never interleave.

An op may add facts about the call (the backend or specialization it chose) with :func:`note`;
at level 3 and above they are logged after the call and stored in its dump. Modules the JIT loads
during a call are logged and recorded the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import inspect
import itertools
import mmap
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, overload

from ember.config import knobs

__all__ = ["REGISTRY", "api", "describe", "note", "tensor_stats"]

F = TypeVar("F", bound=Callable[..., Any])

REGISTRY: dict[str, Callable[..., Any]] = {}
"""API name -> the undecorated function, filled at decoration time whatever the level."""

_SEQ = itertools.count(1)
# NOTE: the pid, cached (os.getpid() is a system call, 0.2 us a call, and the level-1 wrapper's
# whole budget is 2 us); a forked child refreshes it.
_PID = [os.getpid()]


def _forked() -> None:
    """In a forked child: its pid, and fresh sink locks (a parent thread may have held one)."""
    _PID[0] = os.getpid()
    for sink in _SINKS.values():
        sink._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
_LOCAL = threading.local()  # .stack: the calls being logged in this thread (nested public calls)


@overload
def api(fn: F, *, name: str | None = None) -> F: ...
@overload
def api(fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...
def api(fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
    """Register ``fn`` as the public API ``name`` (default ``ember.<qualname>``) and log its
    calls at ``EMBER_LOGLEVEL``; at level 0 ``fn`` itself is returned.

    Examples
    --------
    >>> @api
    ... def rmsnorm(x, weight, eps=1e-6): ...           # doctest: +SKIP
    """

    def decorate(f: F) -> F:
        api_name = name or f"ember.{f.__qualname__}"
        REGISTRY[api_name] = f
        f.__ember_api__ = api_name  # type: ignore[attr-defined]
        level = knobs.loglevel
        if level == 0:
            return f
        sink = _sink(knobs.logdest)
        if level == 1:
            return _name_only(f, api_name, sink)
        wrapped: F = _Logged(f, api_name, level, sink).wrapper()
        return wrapped

    return decorate if fn is None else decorate(fn)


def note(**facts: Any) -> None:
    """Attach facts (e.g. ``spec="decode_bf16_bf16_d128_g4"``) to the call being logged.

    A no-op when no call is logged at level 3 or above in this thread.
    """
    stack = getattr(_LOCAL, "stack", None)
    if stack:
        stack[-1].notes.update(facts)


def _name_only(f: F, api_name: str, sink: _Sink) -> F:
    # NOTE: the line's bytes after the call number are built once; a call adds the number only.
    tail = f"] {api_name}\n".encode()
    line = sink.line

    @functools.wraps(f)
    def logged(*args: Any, **kwargs: Any) -> Any:
        line(next(_SEQ), tail)
        return f(*args, **kwargs)

    return logged  # type: ignore[return-value]


class _Call:
    """One logged call: its tag and what the op and the JIT reported during it."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.tag = f"[ember.api pid={_PID[0]} #{seq}]"
        self.notes: dict[str, Any] = {}


class _Logged:
    """The level 3+ wrapper of one function."""

    def __init__(self, f: Callable[..., Any], api_name: str, level: int, sink: _Sink) -> None:
        self.f, self.api_name, self.level, self.sink = f, api_name, level, sink
        try:
            self.sig: inspect.Signature | None = inspect.signature(f)
        except (TypeError, ValueError):
            self.sig = None
        # NOTE: in-place ops (a trailing underscore) return nothing: their arguments are results.
        self.inplace = f.__name__.endswith("_")

    def wrapper(self) -> Any:
        @functools.wraps(self.f)
        def logged(*args: Any, **kwargs: Any) -> Any:
            return self.call(args, kwargs)

        return logged

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.sig is not None:
            try:
                bound = self.sig.bind(*args, **kwargs)
            except TypeError:
                pass  # the function itself raises the right error
            else:
                bound.apply_defaults()
                return dict(bound.arguments)
        return {"args": args, "kwargs": kwargs}

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from ember.jit.build import loaded_modules

        call = _Call(next(_SEQ))
        stack = _LOCAL.__dict__.setdefault("stack", [])
        tag = call.tag
        inside = f" (inside #{stack[-1].seq})" if stack else ""
        arguments = self.arguments(args, kwargs)
        lines = [f"{tag} {self.api_name}{inside}"]
        lines += [f"{tag}   {k}: {describe(v)}" for k, v in arguments.items()]
        self.sink.write("\n".join(lines) + "\n")
        capturing = self.level >= 5 and _capturing()
        if self.level >= 5:
            self.sink.write(_stats_lines(tag, arguments.items(), capturing))
        dump = None
        if self.level >= 10 and not stack:
            from ember import api_dump

            dump, why = api_dump.begin(
                self.api_name, self.f, call.seq, arguments, capturing=capturing, level=self.level
            )
            self.sink.write(f"{tag}   {why}\n")
        before = len(loaded_modules())
        stack.append(call)
        try:
            result = self.f(*args, **kwargs)
        except BaseException as exc:
            self.sink.write(f"{tag}   raised {type(exc).__name__}: {exc}\n")
            if dump is not None:
                dump.finish_raised(exc, loaded_modules()[before:], call.notes)
            raise
        finally:
            stack.pop()
        self.sink.write(self.after(call, arguments, result, loaded_modules()[before:], capturing))
        if dump is not None:
            said = dump.finish(result, loaded_modules()[before:], call.notes)
            self.sink.write(f"{tag}   {said}\n")
        return result

    def after(
        self,
        call: _Call,
        arguments: dict[str, Any],
        result: Any,
        modules: list[dict[str, Any]],
        capturing: bool,
    ) -> str:
        tag = call.tag
        lines = [f"{tag}   -> {name}: {describe(v)}" for name, v in _parts("return", result)]
        lines += [
            f"{tag}   module loaded: {m['uri']} key={m['key']} targets={m['targets']}"
            for m in modules
        ]
        lines += [f"{tag}   note: {k}={v!r}" for k, v in call.notes.items()]
        text = "\n".join(lines) + "\n" if lines else ""
        if self.level >= 5:
            outs = [("return", result)]
            if self.inplace:
                outs += [(f"{k} (after)", v) for k, v in arguments.items()]
            text += _stats_lines(tag, outs, capturing)
        return text


def _torch_tensor() -> type | None:
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


def _capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (never true without torch.cuda)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return False
    return bool(torch.cuda.is_current_stream_capturing())


def _tensor_text(t: Any) -> str:
    return (
        f"Tensor(shape={list(t.shape)}, dtype={t.dtype}, strides={list(t.stride())}, "
        f"device={t.device}, contiguous={t.is_contiguous()})"
    )


def describe(value: Any, depth: int = 0) -> str:
    """One-line metadata of an argument or result (never its tensor contents)."""
    tensor = _torch_tensor()
    if tensor is not None and isinstance(value, tensor):
        return _tensor_text(value)
    if value is None or isinstance(value, bool | int | float | complex):
        return repr(value)
    if isinstance(value, str | bytes):
        text = repr(value)
        return text if len(text) <= 120 else text[:117] + "..."
    kind = type(value)
    if kind.__module__ == "torch" and kind.__name__ in ("dtype", "device"):
        return str(value)
    if depth >= 2:
        return kind.__name__
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        fields = ", ".join(f"{k}={describe(getattr(value, k), depth + 1)}" for k in value._fields)
        return f"{kind.__name__}({fields})"
    if isinstance(value, tuple | list):
        items = [describe(v, depth + 1) for v in value[:8]]
        more = f", ... {len(value) - 8} more" if len(value) > 8 else ""
        return f"{kind.__name__}[{', '.join(items)}{more}]"
    if isinstance(value, dict):
        items = [f"{k!r}: {describe(v, depth + 1)}" for k, v in list(value.items())[:8]]
        more = f", ... {len(value) - 8} more" if len(value) > 8 else ""
        return "{" + ", ".join(items) + more + "}"
    return _object_text(value)


def _object_text(value: Any) -> str:
    """``TypeName(attr=..., ...)`` from an object's scalar attributes (at most 8)."""
    attrs = []
    for k, v in getattr(value, "__dict__", {}).items():
        if k.startswith("_"):
            continue
        if v is None or isinstance(v, bool | int | float | str):
            attrs.append(f"{k}={v!r}")
        elif type(v).__module__ == "torch" and type(v).__name__ == "device":
            attrs.append(f"{k}={v}")
        if len(attrs) == 8:
            break
    return f"{type(value).__name__}({', '.join(attrs)})"


def _parts(prefix: str, value: Any) -> list[tuple[str, Any]]:
    """The result lines: ``return`` or, for a plain tuple or list, ``return.<i>`` per item."""
    if value is None:
        return []
    if isinstance(value, tuple | list) and not hasattr(value, "_fields"):
        return [(f"{prefix}.{i}", v) for i, v in enumerate(value)]
    return [(prefix, value)]


def _tensor_leaves(prefix: str, value: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """``(name, tensor)`` for every tensor in ``value``, through tuples, lists, NamedTuples (by
    field) and dicts: ``return.0``, ``kv_cache.1``, ``plan.kv_indptr``."""
    tensor = _torch_tensor()
    if tensor is not None and isinstance(value, tensor):
        return [(prefix, value)]
    if depth >= 3:
        return []
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        items: Any = ((k, getattr(value, k)) for k in value._fields)
    elif isinstance(value, tuple | list):
        items = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return []
    return [x for k, v in items for x in _tensor_leaves(f"{prefix}.{k}", v, depth + 1)]


def tensor_stats(t: Any) -> str:
    """``min=.. max=.. mean=.. nan=.. inf=..`` of a tensor (floating: over finite elements)."""
    if t.numel() == 0:
        return "empty"
    x = t.detach()
    if x.is_complex():
        return "complex: no statistics"
    if x.is_floating_point():
        x = x.float()
        finite_mask = x.isfinite()
        nan, inf = int(x.isnan().sum()), int(x.isinf().sum())
        finite = x[finite_mask]
        if finite.numel() == 0:
            return f"no finite element nan={nan} inf={inf}"
        return (
            f"min={float(finite.min()):.6g} max={float(finite.max()):.6g} "
            f"mean={float(finite.mean()):.6g} nan={nan} inf={inf}"
        )
    x = x.long()
    return f"min={int(x.min())} max={int(x.max())}"


def _stats_lines(tag: str, items: Any, capturing: bool) -> str:
    names = [leaf for name, value in items for leaf in _tensor_leaves(name, value)]
    if not names:
        return ""
    if capturing:
        return f"{tag}   stats skipped: CUDA graph capture\n"
    return "".join(f"{tag}   stats {leaf}: {tensor_stats(v)}\n" for leaf, v in names)


class _Sink:
    """A log destination: ``stderr``, ``stdout``, or a file appended to (``%p``: the pid), by a
    shared memory map when the path has ``%p`` and by ``os.write`` with ``O_APPEND`` when not."""

    def __init__(self, dest: str) -> None:
        self.dest = dest
        self._pid = -1  # the process the open file and ``_head`` belong to
        self._head = b""  # b"[ember.api pid=P #"
        self._fd = -1
        self._map: mmap.mmap | None = None
        self._lock = threading.Lock()
        self._put: Callable[[bytes], None] = self._stream

    def line(self, seq: int, tail: bytes) -> None:
        """Write the level-1 line of call ``seq``; ``tail`` is ``b"] <api name>\\n"``."""
        if self._pid != _PID[0]:
            self._open()
        self._put(b"%b%d%b" % (self._head, seq, tail))

    def write(self, text: str) -> None:
        if not text:
            return
        if self._pid != _PID[0]:
            self._open()
        self._put(text.encode("utf-8", "replace"))

    def _stream(self, data: bytes) -> None:
        stream = sys.stderr if self.dest == "stderr" else sys.stdout
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()

    def _append(self, data: bytes) -> None:
        while data:
            data = data[os.write(self._fd, data) :]

    def _mapped(self, data: bytes) -> None:
        # NOTE: a MAP_SHARED page is the page cache: a line copied into it outlives a SIGKILL of
        # this process as an os.write would (R6.1), without a system call. The lock keeps the
        # map's position, growth and close consistent between threads; acquire and release cost
        # half of a with block.
        lock = self._lock
        lock.acquire()
        try:
            self._map.write(data)  # type: ignore[union-attr]
        except ValueError:  # full
            self._grow(self._map, len(data)).write(data)  # type: ignore[arg-type]
        except AttributeError:  # closed at exit: appended
            self._append(data)
        finally:
            lock.release()

    def _open(self) -> None:
        """Open the file of this process (first use, or a forked child: its own file with %p)."""
        with self._lock:
            pid = _PID[0]
            if self._pid == pid:
                return
            if self._map is not None:  # the parent's: unmapped here, left to the parent
                self._map.close()
                self._map = None
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if self.dest not in ("stderr", "stdout"):
                path = Path(self.dest.replace("%p", str(pid))).expanduser()
                path.parent.mkdir(parents=True, exist_ok=True)
                if "%p" in self.dest:  # this process's own file
                    self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                    self._map = self._map_file()
                    self._put = self._append if self._map is None else self._mapped
                else:
                    # NOTE: O_APPEND: lines of several processes sharing one file never overwrite.
                    self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                    self._put = self._append
            self._head = f"[ember.api pid={pid} #".encode()
            self._pid = pid

    def _map_file(self) -> mmap.mmap | None:
        """The open file grown and mapped, positioned after what is in it; None where the file
        system cannot map it (lines are then appended by ``os.write``)."""
        size = os.fstat(self._fd).st_size
        try:
            self._extend(_MAP_STEP * (size // _MAP_STEP + 1))
            m = mmap.mmap(self._fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            os.lseek(self._fd, 0, os.SEEK_END)
            return None
        end = size
        if size and m[size - 1] == 0:  # the padding of a crashed process that had this pid
            end = m.rfind(b"\n", 0, size) + 1
        m.seek(end)
        _register_close()
        return m

    def _extend(self, size: int) -> None:
        """Grow the file to ``size`` bytes with its blocks reserved, so that a full disk is an
        OSError here rather than a SIGBUS when a line is copied into a page of the map."""
        try:
            os.posix_fallocate(self._fd, 0, size)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise
            os.ftruncate(self._fd, size)  # a file system without fallocate

    def _grow(self, m: mmap.mmap, need: int) -> mmap.mmap:
        """The map of the file grown by its size (at most ``_MAP_GROW_MAX``) or ``need`` bytes."""
        end = m.tell()
        size = max(len(m) + min(len(m), _MAP_GROW_MAX), end + need)
        self._extend(-(-size // _MAP_STEP) * _MAP_STEP)
        m.close()
        self._map = None  # should the new map fail, later lines are appended after ``end``
        os.lseek(self._fd, end, os.SEEK_SET)
        self._map = mmap.mmap(self._fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._map.seek(end)
        return self._map

    def close(self) -> None:
        """Trim this process's mapped file to the bytes written and unmap it; later lines are
        appended by ``os.write`` (at exit: other ``atexit`` handlers may still log)."""
        with self._lock:
            if self._map is None or self._pid != _PID[0]:
                return
            end = self._map.tell()
            self._map.close()
            self._map = None
            os.ftruncate(self._fd, end)
            os.lseek(self._fd, end, os.SEEK_SET)


_MAP_STEP = 1 << 20
_MAP_GROW_MAX = 64 << 20
_SINKS: dict[str, _Sink] = {}
_CLOSE_REGISTERED = [False]


def _sink(dest: str) -> _Sink:
    if dest not in _SINKS:
        _SINKS[dest] = _Sink(dest)
    return _SINKS[dest]


def _register_close() -> None:
    if not _CLOSE_REGISTERED[0]:
        _CLOSE_REGISTERED[0] = True
        atexit.register(_close_sinks)


def _close_sinks() -> None:
    """At exit: trim every mapped log of this process (a crash leaves the NUL padding)."""
    for sink in list(_SINKS.values()):
        sink.close()

"""The one build-and-load template (R2.3-R2.5, R5.1, R5.5, R5.6).

:func:`build_and_load` goes, in order:

1. in-process cache (a dict lookup);
2. the disk entry ``<cache>/jit/<uri>/<key>/`` whose ``metadata.json`` validates;
3. a validated, matching prebuilt entry from a local source: ``EMBER_PREBUILT_PATH``, the
   installed ``ember-prebuilt`` package, artifacts downloaded earlier (:mod:`ember.jit.prebuilt`);
4. a download from ``EMBER_ARTIFACT_URL`` when one is set (:mod:`ember.jit.artifacts`);
5. refusal with :class:`JitDisabledError` when ``EMBER_DISABLE_JIT`` is set;
6. the per-key OS lock (``flock``: freed by the kernel when a holder dies), a re-check, a build in
   a staging directory, ``metadata.json`` written last, an atomic rename into place;
7. ``tvm_ffi.load_module``.

A half-built module can never be loaded: only a renamed, complete directory is ever looked at,
and its ``.so`` must match the sha256 recorded in its metadata.
"""

from __future__ import annotations

import contextvars
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember._version import __version__
from ember.config import knobs
from ember.errors import (
    ArtifactError,
    CompileError,
    EmberError,
    JitDisabledError,
    ToolchainError,
)
from ember.jit import entry as entry_mod
from ember.jit.arch import Arch, ArchContext
from ember.jit.key import KeyInputs, digest_sources
from ember.jit.manifest import render
from ember.jit.ninja import module_parallelism, plan_parallelism, run_ninja
from ember.jit.spec import BuildMode, KernelSpec
from ember.jit.toolchain import get_toolchain, tvm_ffi_paths
from ember.jit.workspace import Workspace

__all__ = [
    "Resolved",
    "apply_log_level",
    "build",
    "build_and_load",
    "build_many",
    "clear_memory_cache",
    "loaded_modules",
    "resolve",
]

logger = logging.getLogger("ember.jit")

_LOADED: dict[str, Any] = {}
_LOADED_INFO: dict[str, dict[str, Any]] = {}  # memo -> what loaded_modules() reports
_GUARD = threading.Lock()
_KEY_LOCKS: dict[str, threading.Lock] = {}


@dataclass(frozen=True)
class Resolved:
    """A spec resolved against the current settings: its key inputs and where it lives."""

    spec: KernelSpec
    targets: tuple[Arch, ...]
    mode: BuildMode
    sources: tuple[tuple[str, str], ...]
    inputs: KeyInputs | None
    """``None`` when the compiler is unavailable (only a prebuilt entry can serve then)."""
    compiler_error: ToolchainError | None
    workspace: Workspace

    @property
    def key(self) -> str | None:
        return self.inputs.key if self.inputs else None

    @property
    def entry(self) -> Path | None:
        return self.workspace.entry_dir(self.spec.uri, self.key) if self.key else None


def resolve(spec: KernelSpec) -> Resolved:
    """Targets, mode, digests and key of ``spec``; raises before anything is built or written."""
    if spec.toolchain == "cuda":
        targets = ArchContext.current().targets_for(spec.uri, spec.archs)
    else:
        targets = ()
    mode = BuildMode(debug=knobs.jit_debug, lineinfo=knobs.jit_lineinfo)
    sources = digest_sources(spec)
    toolchain = get_toolchain(spec.toolchain)
    inputs: KeyInputs | None = None
    error: ToolchainError | None = None
    try:
        compiler = toolchain.version()
    except ToolchainError as exc:
        error = exc
    else:
        inputs = KeyInputs(
            spec=spec,
            compiler=compiler,
            targets=targets,
            mode=mode,
            extra_cuda_flags=knobs.extra_cuda_flags if spec.toolchain == "cuda" else (),
            sources=sources,
            ember_version=__version__,
            tvm_ffi_version=tvm_ffi_paths()[2],
        )
    return Resolved(spec, targets, mode, sources, inputs, error, Workspace.current())


def build_and_load(spec: KernelSpec) -> Any:
    """Return the loaded module for ``spec``, building it only if no valid copy exists.

    Raises
    ------
    UnsupportedError
        None of the requested architectures is supported by the spec (before compiling).
    JitDisabledError
        A build is needed but ``EMBER_DISABLE_JIT`` is set.
    CompileError
        The compiler failed; the error carries the command, exit code, first errors and build dir.
    """
    r = resolve(spec)
    memo = r.key or f"prebuilt:{spec.uri}:{r.sources}:{r.targets}:{r.mode}"
    module = _LOADED.get(memo)
    if module is not None:
        return module
    if knobs.disable_cache:
        module = _load(_build_throwaway(r))
        _LOADED_INFO.setdefault(memo, _info(r))
        return module
    with _key_lock(memo):
        module = _LOADED.get(memo)
        if module is None:
            module = _load(build(r))
            _LOADED[memo] = module
            _LOADED_INFO[memo] = _info(r)
    return module


def _info(r: Resolved) -> dict[str, Any]:
    flags = r.inputs.extra_cuda_flags if r.inputs else ()
    return {
        "uri": r.spec.uri,
        "key": r.key,
        "targets": [str(a) for a in r.targets] or ["host"],
        "debug": r.mode.debug,
        "lineinfo": r.mode.lineinfo,
        "extra_cuda_flags": list(flags),
    }


def loaded_modules() -> list[dict[str, Any]]:
    """The modules this process loaded, in load order: uri, key, targets and build flags.

    API logging records the ones loaded during a call, and dumps all of them (R6.12).
    """
    return list(_LOADED_INFO.values())


def build(r: Resolved, *, prebuilt: bool = True) -> Path:
    """Make sure a valid module exists for ``r``; return the path of its ``.so`` file.

    ``prebuilt=False`` looks only at the JIT cache before compiling (``ember aot build``: a
    prebuilt tree is made from this machine's own builds, never from another tree).
    """
    apply_log_level()
    uri = r.spec.uri
    if r.entry is not None:
        so = entry_mod.validate(r.entry, r.key or "", log_problems=True)
        if so is not None:
            return so
    if prebuilt:
        from ember.jit import prebuilt as prebuilt_mod

        so = prebuilt_mod.find_local(r) or _download(r)
        if so is not None:
            return so
    if knobs.disable_jit:
        raise JitDisabledError(
            f"module {uri!r} (key {r.key or 'unknown'}, targets "
            f"{[str(a) for a in r.targets] or ['host']}) is not in the cache "
            f"{r.workspace.root}, in EMBER_PREBUILT_PATH, in an installed ember-prebuilt package "
            "nor at EMBER_ARTIFACT_URL, and EMBER_DISABLE_JIT is set. Build a prebuilt tree "
            f'with `ember aot build --arch "<targets>" --ops {uri} --out DIR` on a machine with '
            "the compilers and point EMBER_PREBUILT_PATH at it, or run `ember precompile --ops "
            f"{uri}` there and copy the cache, or unset EMBER_DISABLE_JIT."
        )
    if r.inputs is None or r.entry is None:
        assert r.compiler_error is not None
        raise r.compiler_error
    return _build_locked(r, r.inputs, r.entry)


def build_many(
    specs: Sequence[KernelSpec | Resolved],
    *,
    jobs: int | None = None,
    prebuilt: bool = True,
    report: Callable[[KernelSpec, Path | EmberError, float], None] | None = None,
) -> list[Path | EmberError]:
    """Build ``specs`` into the cache, ``jobs`` modules at a time; nothing is loaded.

    The warm-up for a deploy or a test session (``ember precompile --jobs``): each spec is
    resolved under the caller's knob state (a :class:`Resolved` item is taken as it is, so a
    caller that resolved first, to tell cached modules from new ones, does not resolve twice),
    then built as :func:`build` would (cache, prebuilt sources, the per-key lock, staging, atomic
    publish), so concurrent builds of different modules never share a directory and two of the
    same key wait on its lock. ``jobs`` defaults to :func:`ember.jit.ninja.module_parallelism`
    (CPUs and memory).

    Returns, in the order of ``specs``, each module's ``.so`` or the error that stopped it
    (:class:`UnsupportedError` for a spec that supports none of the targets); ``report`` is
    called as each one finishes, with the seconds it took. Nothing raises but a bad ``jobs``.
    """
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"build_many: `jobs` must be a positive int or None, got {jobs!r}")
    workers = jobs if jobs is not None else module_parallelism()

    def one(item: KernelSpec | Resolved) -> Path | EmberError:
        t0 = time.perf_counter()
        spec = item.spec if isinstance(item, Resolved) else item
        try:
            r = item if isinstance(item, Resolved) else resolve(spec)
            out: Path | EmberError = build(r, prebuilt=prebuilt)
        except EmberError as exc:  # UnsupportedError, CompileError, ToolchainError, ...
            out = exc
        if report is not None:
            report(spec, out, time.perf_counter() - t0)
        return out

    if workers == 1 or len(specs) <= 1:
        return [one(s) for s in specs]
    with ThreadPoolExecutor(max_workers=min(workers, len(specs))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, one, s) for s in specs]
        return [f.result() for f in futures]


def _download(r: Resolved) -> Path | None:
    """The download step; a failed download falls back to compiling when that is allowed."""
    from ember.jit import artifacts

    try:
        return artifacts.fetch_for(r)
    except ArtifactError as exc:
        # NOTE: offline, locked (EMBER_DISABLE_JIT) or compiler-less nodes must fail here (R7.1).
        if knobs.offline or knobs.disable_jit or r.inputs is None:
            raise
        logger.warning("%s; compiling module %s instead", exc, r.spec.uri)
        return None


def _build_locked(r: Resolved, inputs: KeyInputs, entry: Path) -> Path:
    import filelock  # NOTE: lazy: it pulls in asyncio (~30 ms), needed only when building.

    lock_path = r.workspace.lock_path(r.spec.uri, inputs.key)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(lock_path))
    try:
        lock.acquire(timeout=1.0)
    except filelock.Timeout:
        logger.info(
            "waiting for lock %s: another process is building module %s", lock_path, r.spec.uri
        )
        lock.acquire()
    try:
        so = entry_mod.validate(entry, inputs.key, log_problems=False)
        if so is not None:
            return so
        jit_dir = entry.parent
        jit_dir.mkdir(parents=True, exist_ok=True)
        entry_mod.remove_dead_staging(jit_dir)
        staging = Path(tempfile.mkdtemp(dir=jit_dir, prefix=f".staging-{os.getpid()}-"))
        try:
            _compile(r, inputs, staging)
        except CompileError as exc:
            # NOTE: keep the failed build for inspection, under a name no loader looks at.
            failed = jit_dir / f".failed-{inputs.key[:16]}"
            shutil.rmtree(failed, ignore_errors=True)
            os.replace(staging, failed)
            raise CompileError(
                r.spec.uri, command=exc.command.replace(str(staging), str(failed)),
                returncode=exc.returncode, errors=exc.errors, build_dir=failed,
            ) from None  # fmt: skip
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        entry_mod.publish(staging, entry)
        so = entry_mod.validate(entry, inputs.key, log_problems=True)
        if so is None:
            raise RuntimeError(f"module {r.spec.uri!r} was built but does not validate at {entry}")
        return so
    finally:
        lock.release()


def _compile(r: Resolved, inputs: KeyInputs, build_dir: Path) -> None:
    """Write build.ninja, run ninja, then write metadata.json last."""
    toolchain = get_toolchain(r.spec.toolchain)
    threads = knobs.nvcc_threads if r.spec.toolchain == "cuda" else 1
    plan = toolchain.compile_rules(r.spec, r.targets, r.mode, threads)
    (build_dir / "build.ninja").write_text(render(plan), encoding="utf-8")
    jobs = plan_parallelism(plan.compile_units, threads)
    where = ", ".join(str(a) for a in r.targets) or "host"
    logger.info(
        "compiling module %s for [%s] (%d units, jobs=%d) ...",
        r.spec.uri,
        where,
        plan.compile_units,
        jobs,
    )
    t0 = time.perf_counter()
    run_ninja(r.spec.uri, build_dir, jobs)
    seconds = time.perf_counter() - t0
    entry_mod.write_metadata(build_dir, inputs, plan.output, seconds)
    logger.info("compiled module %s for [%s] in %.1f s", r.spec.uri, where, seconds)


def _build_throwaway(r: Resolved) -> Path:
    """EMBER_DISABLE_CACHE: build in a fresh temporary directory; the cache is not touched."""
    if knobs.disable_jit:
        raise JitDisabledError(
            f"module {r.spec.uri!r}: EMBER_DISABLE_CACHE forces a build but EMBER_DISABLE_JIT "
            "forbids it; unset one of them"
        )
    if r.inputs is None:
        assert r.compiler_error is not None
        raise r.compiler_error
    build_dir = Path(tempfile.mkdtemp(prefix=f"ember-nocache-{r.spec.uri}-"))
    logger.info("EMBER_DISABLE_CACHE: building %s in %s", r.spec.uri, build_dir)
    _compile(r, r.inputs, build_dir)
    return build_dir / f"{r.spec.uri}.so"


def apply_log_level() -> None:
    """Apply ``EMBER_JIT_LOGLEVEL`` to the ``ember.jit`` logger (R7.8: not the API log level).

    With no handler anywhere up the logger tree, a stderr handler is added so the level shows.
    """
    level = knobs.jit_loglevel
    if level is None:
        return
    logger.setLevel(level)
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        logger.addHandler(handler)


def _key_lock(memo: str) -> threading.Lock:
    with _GUARD:
        return _KEY_LOCKS.setdefault(memo, threading.Lock())


def _load(so: Path) -> Any:
    import tvm_ffi  # NOTE: lazy: it imports torch when present, which `import ember.jit` must not.

    return tvm_ffi.load_module(str(so))


def clear_memory_cache() -> None:
    """Forget modules loaded by this process (they stay loaded; the next call re-resolves) and
    the artifact manifests it fetched."""
    _LOADED.clear()
    _LOADED_INFO.clear()
    from ember.jit import artifacts

    artifacts.forget_manifests()

"""Ahead-of-time builds for an explicit GPU list, and the ``ember-prebuilt`` package (R7.14).

:func:`aot_build` resolves and builds every registered spec (or a matching subset) with the
*same* :func:`~ember.jit.build.resolve` / :func:`~ember.jit.build.build` template the JIT uses,
only with ``EMBER_CUDA_ARCH_LIST`` set to the requested list and the prebuilt lookup off. The
finished cache entries are copied into a prebuilt tree with a ``manifest.json`` (see
:mod:`ember.jit.prebuilt` for the layout). :func:`package_wheel` turns a tree into an installable,
version-locked wheel: ``ember-prebuilt==<ember version>+<arch tag>``, import name
``ember_prebuilt``, which requires exactly ``ember-kernels==<ember version>``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ember._version import __version__
from ember.config import knobs
from ember.errors import ConfigError, UnsupportedError
from ember.jit.arch import parse_arch
from ember.jit.build import build, resolve
from ember.jit.entry import file_sha256, read_metadata
from ember.jit.prebuilt import (
    MANIFEST,
    MANIFEST_SCHEMA,
    PACKAGE_DIST_NAME,
    PACKAGE_IMPORT_NAME,
    arch_tag,
    describe,
    read_manifest,
)
from ember.jit.registry import specs_by_family
from ember.jit.toolchain import tvm_ffi_paths
from ember.jit.workspace import PACKAGE_DIR, atomic_write

__all__ = ["SHIPPED_FILES", "aot_build", "package_wheel"]

SHIPPED_FILES = ("metadata.json", "build.ninja")
"""Besides the module itself; objects and build logs stay in the JIT cache."""


def _check_out(out: Path, flag: str) -> Path:
    out = out.expanduser().resolve()
    if out == PACKAGE_DIR or PACKAGE_DIR in out.parents:
        raise ConfigError(
            f"{flag}={out} is inside the installed ember package {PACKAGE_DIR}; ember never "
            "writes there (R2.6). Choose a directory outside it."
        )
    return out


def _parse_archs(archs: Sequence[str] | None) -> tuple[str, ...]:
    items = [archs] if isinstance(archs, str) else list(archs or ())
    listed = tuple(a for item in items for a in item.replace(",", " ").split())
    if not listed:
        raise UnsupportedError(
            f"ember aot build needs an explicit architecture list: arch={archs!r}; "
            "expected e.g. --arch '8.0 9.0a'. It never guesses from the GPUs in this machine "
            "(R1.10, R7.14)."
        )
    return tuple(str(a) for a in sorted({parse_arch(a) for a in listed}))


def aot_build(
    out: Path,
    archs: Sequence[str] | None,
    pattern: str | None = None,
    *,
    report: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Build the registered specs matching ``pattern`` for ``archs`` into the tree ``out``.

    Returns the manifest. Specs that support none of ``archs`` are listed under ``skipped``.

    Raises
    ------
    UnsupportedError
        ``archs`` is empty or missing.
    ConfigError
        An arch is malformed, ``out`` is inside the package or a non-empty directory.
    CompileError, ToolchainError
        A build failed; nothing is written to ``out``.
    """
    targets = _parse_archs(archs)
    out = _check_out(out, "--out")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out={out} exists and is not empty; choose a new directory")
    specs = specs_by_family(pattern)
    if not specs:
        raise ConfigError(f"--ops={pattern!r} matches no registered spec; see `ember precompile`")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-"))
    modules: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    try:
        with knobs.scope(cuda_arch_list=targets):
            for i, (family, spec) in enumerate(specs, 1):
                t0 = time.perf_counter()
                try:
                    r = resolve(spec)
                except UnsupportedError as exc:
                    skipped.append({"uri": spec.uri, "reason": str(exc)})
                    report(f"[{i}/{len(specs)}] {spec.uri}: skipped (supports none of {targets})")
                    continue
                so = build(r, prebuilt=False)
                modules.append(_copy_entry(family, so, staging))
                report(f"[{i}/{len(specs)}] {spec.uri}: {time.perf_counter() - t0:.1f} s")
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "ember": __version__,
            "tvm_ffi": tvm_ffi_paths()[2],
            "archs": list(targets),
            "arch_tag": arch_tag(targets),
            "platform": sysconfig.get_platform(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "modules": modules,
            "skipped": skipped,
        }
        atomic_write(staging / MANIFEST, _dumps(manifest))
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _dumps(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


def _copy_entry(family: str, so: Path, tree: Path) -> dict[str, Any]:
    """Copy a built cache entry into ``tree/<uri>/<key>/``; its manifest record."""
    entry = so.parent
    meta = read_metadata(entry)
    if meta is None:
        raise RuntimeError(f"cache entry {entry} lost its metadata.json while being copied")
    uri, key = str(meta["uri"]), str(meta["key"])
    rel = f"{uri}/{key}"
    dest = tree / uri / key
    dest.mkdir(parents=True)
    files: dict[str, dict[str, Any]] = {}
    for name in (so.name, *SHIPPED_FILES):
        if not (entry / name).is_file():
            continue
        shutil.copyfile(entry / name, dest / name)
        files[f"{rel}/{name}"] = {
            "sha256": file_sha256(dest / name),
            "size": (dest / name).stat().st_size,
        }
    return {**describe(meta["inputs"]), "family": family, "key": key, "path": rel, "files": files}


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def package_wheel(tree: Path, out_dir: Path) -> Path:
    """Pack a prebuilt tree into ``ember_prebuilt-<ember>+<tag>-py3-none-<platform>.whl``.

    Raises
    ------
    ConfigError
        ``tree`` has no manifest, or it was built by another ember version (the package would
        claim a version it does not hold).
    """
    tree = tree.expanduser().resolve()
    manifest = read_manifest(tree)
    if manifest is None:
        raise ConfigError(f"tree={tree} has no {MANIFEST}; build one with `ember aot build`")
    if manifest.get("ember") != __version__:
        raise ConfigError(
            f"tree={tree} was built by ember {manifest.get('ember')!r}, this is ember "
            f"{__version__}; package it with the ember that built it (versions are locked)"
        )
    version = f"{__version__}+{manifest['arch_tag']}"
    plat = str(manifest["platform"]).replace("-", "_").replace(".", "_")
    dist = PACKAGE_DIST_NAME.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files: list[tuple[str, bytes]] = [
        (f"{PACKAGE_IMPORT_NAME}/__init__.py", _init_py(manifest).encode()),
    ]
    for p in sorted(tree.rglob("*")):
        if p.is_file():
            files.append(
                (f"{PACKAGE_IMPORT_NAME}/{p.relative_to(tree).as_posix()}", p.read_bytes())
            )
    files += [
        (f"{info}/METADATA", _metadata(version, manifest).encode()),
        (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: ember {__version__}\n"
         f"Root-Is-Purelib: false\nTag: py3-none-{plat}\n".encode()),
    ]  # fmt: skip
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))
    out_dir = _check_out(out_dir, "--out")
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{dist}-{version}-py3-none-{plat}.whl"
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{wheel.name}.", suffix=".tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in files:
                z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
        os.replace(tmp, wheel)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return wheel


def _init_py(manifest: dict[str, Any]) -> str:
    return (
        f'"""Prebuilt ember modules for {" ".join(manifest["archs"])} (ember {__version__}).\n\n'
        "Data only: ember finds this directory without importing it (docs/versioning.md).\n"
        '"""\n\n'
        f"EMBER_VERSION = {__version__!r}\nARCH_TAG = {manifest['arch_tag']!r}\n"
    )


def _metadata(version: str, manifest: dict[str, Any]) -> str:
    uris = ", ".join(m["uri"] for m in manifest["modules"])
    return (
        f"Metadata-Version: 2.1\nName: {PACKAGE_DIST_NAME}\nVersion: {version}\n"
        f"Summary: Prebuilt ember modules for {' '.join(manifest['archs'])}: {uris}\n"
        f"Requires-Dist: ember-kernels=={__version__}\n"
    )

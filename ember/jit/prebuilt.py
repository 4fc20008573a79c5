"""Prebuilt modules: where they come from and when one may be loaded (R1.8, R5.14, R5.15, R7.6).

A *prebuilt tree* (written by ``ember aot build``, see :mod:`ember.jit.aot`) is::

    <root>/manifest.json              every module: uri, key, targets, versions, file sha256s
    <root>/<uri>/<key>/metadata.json  the JIT's own metadata (the same file the cache holds)
    <root>/<uri>/<key>/<uri>.so       the module

Local roots, tried in this order after the JIT cache: each ``EMBER_PREBUILT_PATH`` entry, the
installed ``ember-prebuilt`` package (found by its import name ``ember_prebuilt`` without
importing it), and the artifacts this cache already downloaded (``<cache>/artifacts/<version>``).

An entry is used only when its ember version, source hash, flags, params, build mode and
toolchain equal ours and its targets cover every requested target. Otherwise it is skipped, and
the process logs *one* warning per module naming each mismatch and the command that fixes it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember._version import __version__
from ember.config import knobs
from ember.errors import ConfigError
from ember.jit.arch import Arch, parse_arch
from ember.jit.entry import entry_problem, read_metadata
from ember.jit.key import source_hash
from ember.jit.workspace import Workspace

if TYPE_CHECKING:
    from ember.jit.build import Resolved

__all__ = [
    "MANIFEST",
    "PACKAGE_IMPORT_NAME",
    "PrebuiltRoot",
    "arch_tag",
    "describe",
    "download_root",
    "find_local",
    "find_prebuilt",
    "installed_package_root",
    "local_roots",
    "mismatches",
    "read_manifest",
    "warn_skipped",
]

logger = logging.getLogger("ember.jit")

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = 1
PACKAGE_IMPORT_NAME = "ember_prebuilt"
PACKAGE_DIST_NAME = "ember-prebuilt"

_WARNED: set[tuple[str, tuple[str, ...]]] = set()
_WARNED_GUARD = threading.Lock()


@dataclass(frozen=True)
class PrebuiltRoot:
    """A local directory of prebuilt modules and where it was configured."""

    path: Path
    origin: str
    """``EMBER_PREBUILT_PATH``, ``ember-prebuilt package`` or ``downloaded artifacts``."""


def arch_tag(archs: list[str] | tuple[str, ...]) -> str:
    """The PEP 440 local-version label of an arch list: ``("8.0", "9.0a")`` -> ``sm80.sm90a``."""
    parsed = sorted({parse_arch(a) for a in archs})
    return ".".join(f"sm{a.major}{a.minor}{a.suffix}" for a in parsed)


def installed_package_root() -> Path | None:
    """The directory of the installed ``ember_prebuilt`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec(PACKAGE_IMPORT_NAME)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def download_root() -> Path:
    """Where fetched artifacts of this ember version live: ``<cache>/artifacts/<version>``."""
    return Workspace.current().root / "artifacts" / __version__


def local_roots() -> list[PrebuiltRoot]:
    """Every local prebuilt source, in lookup order (R7.6: local before any download)."""
    roots = [PrebuiltRoot(p, "EMBER_PREBUILT_PATH") for p in knobs.prebuilt_path]
    pkg = installed_package_root()
    if pkg is not None:
        roots.append(PrebuiltRoot(pkg, f"{PACKAGE_DIST_NAME} package"))
    roots.append(PrebuiltRoot(download_root(), "downloaded artifacts"))
    return roots


def read_manifest(root: Path) -> dict[str, Any] | None:
    """The parsed ``manifest.json`` of a tree, ``None`` when absent; raises when malformed."""
    path = root / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); rebuild or re-fetch it") from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise ConfigError(
            f"{path}: expected a manifest object with schema {MANIFEST_SCHEMA}, got "
            f"{type(data).__name__} with schema {schema!r}; rebuild or re-fetch it"
        )
    return data


def describe(payload: dict[str, Any]) -> dict[str, Any]:
    """What a prebuilt module must match, from a ``metadata.json`` ``inputs`` payload."""
    return {
        "uri": payload.get("uri"),
        "toolchain": payload.get("toolchain"),
        "ember": payload.get("ember"),
        "source_hash": source_hash(payload.get("sources") or []),
        "targets": list(payload.get("targets") or []),
        "params": payload.get("params"),
        "flags": {
            k: list(payload.get(k) or []) for k in ("cflags", "cuda_cflags", "extra_cuda_flags")
        }
        | {"ldflags": list(payload.get("ldflags") or [])},
        "mode": payload.get("mode"),
    }


def _wanted(r: Resolved) -> dict[str, Any]:
    s = r.spec
    return {
        "uri": s.uri,
        "toolchain": s.toolchain,
        "ember": __version__,
        "source_hash": source_hash(r.sources),
        "targets": [str(a) for a in r.targets],
        "params": [[k, v] for k, v in s.params],
        "flags": {
            "cflags": list(s.cflags),
            "cuda_cflags": list(s.cuda_cflags),
            "extra_cuda_flags": list(knobs.extra_cuda_flags) if s.toolchain == "cuda" else [],
            "ldflags": list(s.ldflags),
        },
        "mode": r.mode.as_dict(),
    }


def _uncovered(built: list[str], wanted: tuple[Arch, ...]) -> list[Arch]:
    try:
        have = [parse_arch(b) for b in built]
    except ConfigError:
        return list(wanted)
    return [w for w in wanted if not any(h.covers(w) for h in have)]


def mismatches(have: dict[str, Any], r: Resolved) -> list[str]:
    """Why a prebuilt described by ``have`` (see :func:`describe`) cannot serve ``r``."""
    want = _wanted(r)
    out: list[str] = []
    if have.get("ember") != want["ember"] and not knobs.skip_version_check:
        out.append(f"built by ember {have.get('ember')}, this is ember {want['ember']}")
    if have.get("source_hash") != want["source_hash"]:
        out.append(
            f"source hash {str(have.get('source_hash'))[:12]} != {want['source_hash'][:12]} "
            "(its kernel sources differ from this ember's)"
        )
    for field in ("uri", "toolchain", "params", "flags", "mode"):
        if have.get(field) != want[field]:
            out.append(f"{field} {have.get(field)!r} != {want[field]!r}")
    missing = _uncovered(list(have.get("targets") or []), r.targets)
    if missing:
        out.append(
            f"targets [{', '.join(have.get('targets') or [])}] do not cover "
            f"[{', '.join(map(str, missing))}]"
        )
    return out


def find_prebuilt(root: Path, r: Resolved) -> tuple[Path | None, list[str]]:
    """A sound, matching entry under ``root/<uri>/*/`` and why the others were rejected.

    The compiler version may differ (that is what makes prebuilt modules useful on nodes without
    compilers); everything else that shapes the module must match (R5.14).
    """
    base = root / r.spec.uri
    if not base.is_dir():
        return None, []
    rejected: list[str] = []
    for entry in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        meta = read_metadata(entry)
        broken = entry_problem(entry, meta, None)
        if broken is not None or meta is None:
            rejected.append(f"{entry}: {broken}")
            continue
        have = describe(meta.get("inputs") or {})
        problems = mismatches(have, r)
        if problems:
            rejected.append(f"{entry}: {'; '.join(problems)}")
            continue
        if have["ember"] != __version__:
            logger.warning(
                "EMBER_SKIP_VERSION_CHECK=1: loading %s built by ember %s into ember %s "
                "(mixed-version experiment; never in production)",
                entry,
                have["ember"],
                __version__,
            )
        return entry / str(meta["module"]), []
    return None, rejected


def find_local(r: Resolved) -> Path | None:
    """The first matching prebuilt module among :func:`local_roots`; one warning if all fail."""
    rejected: list[str] = []
    for root in local_roots():
        so, why = find_prebuilt(root.path, r)
        if so is not None:
            logger.info(
                "loading prebuilt module %s from %s (%s)", r.spec.uri, so.parent, root.origin
            )
            return so
        rejected += why
    if rejected:
        warn_skipped(r, rejected)
    return None


def _fix_command(r: Resolved) -> str:
    targets = " ".join(str(a) for a in r.targets) or " ".join(knobs.cuda_arch_list or ("LIST",))
    tag = arch_tag([str(a) for a in r.targets]) if r.targets else "<arch tag>"
    return (
        f'rebuild with this ember: `ember aot build --arch "{targets}" --ops {r.spec.uri} '
        f'--out DIR`, or install the matching package: `pip install "{PACKAGE_DIST_NAME}=='
        f'{__version__}+{tag}"`, or run `ember artifacts fetch --ops {r.spec.uri}`'
    )


def warn_skipped(r: Resolved, rejected: list[str]) -> None:
    """Log, once per process and module, every rejected prebuilt with the fix (R5.14)."""
    token = (r.spec.uri, tuple(rejected))
    with _WARNED_GUARD:
        if token in _WARNED:
            return
        _WARNED.add(token)
    logger.warning(
        "skipping prebuilt module %r, it does not match this ember: %s. Fix: %s. Until then it "
        "is downloaded or compiled instead (refused under EMBER_DISABLE_JIT).",
        r.spec.uri,
        " | ".join(rejected),
        _fix_command(r),
    )

"""Cache entries on disk: ``metadata.json``, validation, atomic publish (R5.5).

An entry is a directory holding ``build.ninja``, ``build.log``, objects, ``<uri>.so`` and
``metadata.json``. The metadata is written last and the directory is renamed into place, so a
complete entry appears at once or not at all. Before every load the metadata must parse, match
the expected key, and name a module file whose sha256 matches; anything else is logged and
rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from ember.jit.key import KeyInputs

__all__ = [
    "entry_problem",
    "file_sha256",
    "publish",
    "read_metadata",
    "remove_dead_staging",
    "validate",
    "write_metadata",
]

logger = logging.getLogger("ember.jit")

METADATA = "metadata.json"
SCHEMA = 1
_STAGING_RE = re.compile(r"\.staging-(\d+)-")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_metadata(build_dir: Path, inputs: KeyInputs, module: str, seconds: float) -> None:
    """Record what was built, with what, and the module's sha256; written after the build."""
    payload = inputs.payload()
    meta = {
        "schema": SCHEMA,
        "key": inputs.key,
        "uri": inputs.spec.uri,
        "module": module,
        "module_sha256": file_sha256(build_dir / module),
        "inputs": payload,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(seconds, 3),
        "built_on": socket.gethostname(),
    }
    tmp = build_dir / f".{METADATA}.tmp"
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, build_dir / METADATA)


def read_metadata(entry: Path) -> dict[str, Any] | None:
    """The parsed metadata of ``entry``, or ``None`` when missing or not a JSON object."""
    try:
        meta = json.loads((entry / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def entry_problem(entry: Path, meta: dict[str, Any] | None, key: str | None) -> str | None:
    """Why ``entry`` must not be loaded, or ``None`` if it is sound."""
    if meta is None:
        return "metadata.json is missing, truncated or not JSON"
    if meta.get("schema") != SCHEMA:
        return f"metadata schema {meta.get('schema')!r} != {SCHEMA}"
    if key is not None and meta.get("key") != key:
        return f"metadata key {meta.get('key')!r} does not match the expected key {key}"
    module = meta.get("module")
    if not isinstance(module, str) or "/" in module:
        return "metadata names no module file"
    so = entry / module
    if not so.is_file():
        return f"module file {module} is missing"
    if file_sha256(so) != meta.get("module_sha256"):
        return f"module file {module} does not match its recorded sha256 (truncated or tampered)"
    return None


def validate(entry: Path, key: str, *, log_problems: bool) -> Path | None:
    """The ``.so`` of a sound entry, else ``None`` (a present-but-broken entry is logged)."""
    if not entry.is_dir():
        return None
    meta = read_metadata(entry)
    problem = entry_problem(entry, meta, key)
    if problem is not None:
        if log_problems:
            logger.warning("ignoring cache entry %s: %s; it will be rebuilt", entry, problem)
        return None
    assert meta is not None
    return entry / str(meta["module"])


def publish(staging: Path, entry: Path) -> None:
    """Rename a finished build into place; a broken entry already there is moved away first."""
    if entry.exists():
        trash = entry.parent / f".trash-{os.getpid()}-{entry.name[:16]}"
        shutil.rmtree(trash, ignore_errors=True)
        os.replace(entry, trash)
        shutil.rmtree(trash, ignore_errors=True)
    os.replace(staging, entry)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_staging(jit_dir: Path) -> list[Path]:
    """Delete staging dirs left by builds whose process is gone (e.g. killed by SIGKILL)."""
    removed = []
    for d in jit_dir.glob(".staging-*"):
        m = _STAGING_RE.match(d.name)
        if m and not _pid_alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed

"""Where every generated file goes (R2.6-R2.11): under ``EMBER_CACHE_DIR``, never the package.

Layout::

    <cache>/generated/<uri>/        rendered sources and copied compile units
    <cache>/jit/<uri>/<key>/        build.ninja, objects, <uri>.so, metadata.json, build.log
    <cache>/jit/<uri>/.staging-*    builds in progress (renamed into place when done)
    <cache>/locks/<uri>-<key>.lock  one OS lock per key (EMBER_LOCK_DIR overrides)
    <cache>/toolchains.json         compiler versions, memoised by the compiler file's identity
    <cache>/dumps/                  API-log dumps

Nothing here creates a directory until something is written.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ember.config import knobs

__all__ = [
    "PACKAGE_DIR",
    "CSRC_DIR",
    "INCLUDE_DIR",
    "Workspace",
    "atomic_write",
    "write_if_changed",
]

PACKAGE_DIR = Path(__file__).resolve().parent.parent
CSRC_DIR = PACKAGE_DIR / "csrc"
INCLUDE_DIR = CSRC_DIR / "include"


@dataclass(frozen=True)
class Workspace:
    """The writable workspace rooted at ``root``."""

    root: Path
    lock_root: Path

    @classmethod
    def current(cls) -> Workspace:
        root = knobs.cache_dir.expanduser().resolve()
        if root == PACKAGE_DIR or PACKAGE_DIR in root.parents:
            from ember.errors import ConfigError

            raise ConfigError(
                f"EMBER_CACHE_DIR={root} is inside the installed package {PACKAGE_DIR}; "
                "ember never writes there (it may be read-only). Choose a directory outside it."
            )
        lock = knobs.lock_dir
        return cls(root, lock.expanduser().resolve() if lock else root / "locks")

    def generated_dir(self, uri: str) -> Path:
        return self.root / "generated" / uri

    def jit_dir(self, uri: str) -> Path:
        return self.root / "jit" / uri

    def entry_dir(self, uri: str, key: str) -> Path:
        return self.jit_dir(uri) / key

    def lock_path(self, uri: str, key: str) -> Path:
        return self.lock_root / f"{uri}-{key[:32]}.lock"

    @property
    def toolchains_file(self) -> Path:
        return self.root / "toolchains.json"

    @property
    def dumps_dir(self) -> Path:
        return self.root / "dumps"


def atomic_write(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` so readers see the old or the new file, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_if_changed(path: Path, text: str) -> bool:
    """Write a rendered source only when its content differs (keeps mtimes, R3.8)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except FileNotFoundError:
        pass
    atomic_write(path, text)
    return True

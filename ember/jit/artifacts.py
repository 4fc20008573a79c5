"""The artifact repository: fetch prebuilt modules over HTTP(S) or from a directory (R7.1-R7.6).

Layout of a repository (``EMBER_ARTIFACT_URL``, a trusted mirror, or a local directory)::

    <url>/<ember version>/manifest.json
    <url>/<ember version>/<uri>/<key>/{metadata.json, <uri>.so, build.ninja}

which is exactly the tree ``ember aot build`` writes, placed under its version. Every file is
checked against the sha256 the manifest records for its *full* artifact path (never a bare file
name, so two modules' ``metadata.json`` never collide). Files are streamed into a temporary file
in a staging directory, verified, renamed into place, and a module's directory is renamed into
``<cache>/artifacts/<version>/`` only once all its files verified: a corrupted or partial
download is never installed. At most ``EMBER_DOWNLOAD_WORKERS`` files download at once; each is
retried a bounded number of times with exponential backoff. ``EMBER_OFFLINE=1`` never opens a
network connection.

Only the standard library is used (``urllib``): no new dependency for deployment nodes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import http.client
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TextIO

from ember._version import __version__
from ember.config import knobs
from ember.errors import ArtifactError
from ember.jit.arch import Arch, parse_arch
from ember.jit.entry import file_sha256, publish
from ember.jit.prebuilt import (
    MANIFEST,
    download_root,
    find_prebuilt,
    mismatches,
    read_manifest,
    warn_skipped,
)
from ember.jit.workspace import atomic_write

if TYPE_CHECKING:
    from ember.jit.build import Resolved

__all__ = [
    "DEFAULT_ARTIFACT_URL",
    "Progress",
    "fetch",
    "fetch_for",
    "forget_manifests",
    "repository_url",
]

logger = logging.getLogger("ember.jit")

DEFAULT_ARTIFACT_URL: str | None = None
"""ember has no project-hosted repository yet: nothing is downloaded unless a URL is set."""
ATTEMPTS = 3
BACKOFF_S = 0.5
TIMEOUT_S = 60.0
_CHUNK = 1 << 16
_MANIFESTS: dict[str, dict[str, Any]] = {}
_FAILED: dict[str, ArtifactError] = {}
_MANIFEST_GUARD = threading.Lock()


def repository_url() -> str | None:
    """``<EMBER_ARTIFACT_URL or the default>/<ember version>``, or ``None`` when there is none."""
    base = knobs.artifact_url or DEFAULT_ARTIFACT_URL
    if not base:
        return None
    url = base if "://" in base else Path(base).expanduser().resolve().as_uri()
    return f"{url.rstrip('/')}/{__version__}"


def _is_network(url: str) -> bool:
    return not url.startswith("file:")


@dataclass(frozen=True)
class _File:
    """One artifact file: its full path in the repository, checksum and size."""

    path: str
    sha256: str
    size: int


class Progress:
    """A small progress bar on a terminal (stderr by default); silent when not a terminal."""

    def __init__(self, files: int, size: int, stream: TextIO | None = None) -> None:
        self.files, self.size = files, size
        self.done_files = self.done_bytes = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = files > 1 and self.stream.isatty()
        self._lock = threading.Lock()

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        with self._lock:
            self.done_bytes += nbytes
            self.done_files += files
            if self.enabled:
                self.stream.write("\r" + self.render())
                self.stream.flush()

    def render(self) -> str:
        frac = self.done_bytes / self.size if self.size else 1.0
        bar = "#" * int(30 * frac)
        return (
            f"fetching [{bar:<30}] {self.done_files}/{self.files} files "
            f"{self.done_bytes / 1e6:.1f}/{self.size / 1e6:.1f} MB"
        )

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _open(url: str) -> Any:
    if knobs.offline and _is_network(url):
        raise ArtifactError(f"EMBER_OFFLINE=1 forbids opening {url}")  # NOTE: a guard, not a path
    return urllib.request.urlopen(url, timeout=TIMEOUT_S)


def _retrying(url: str, what: str, attempt_fn: Any) -> Any:
    """Call ``attempt_fn()`` up to ATTEMPTS times with backoff on transient errors."""
    last: Exception | None = None
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        try:
            return attempt_fn()
        except urllib.error.HTTPError as exc:
            last = exc
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise ArtifactError(
                    f"{what}: {url} answered HTTP {exc.code} {exc.reason}; the repository does "
                    f"not have it (check EMBER_ARTIFACT_URL and the ember version {__version__})"
                ) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            last = exc
            if isinstance(getattr(exc, "reason", None), FileNotFoundError):
                raise ArtifactError(
                    f"{what}: {url} does not exist (check EMBER_ARTIFACT_URL and the ember "
                    f"version directory {__version__})"
                ) from None
        logger.info("%s: attempt %d/%d for %s failed: %s", what, attempt + 1, ATTEMPTS, url, last)
    raise ArtifactError(f"{what}: {url} failed after {ATTEMPTS} attempts: {last}")


def forget_manifests() -> None:
    """Drop the manifests fetched by this process; the next lookup fetches again."""
    with _MANIFEST_GUARD:
        _MANIFESTS.clear()
        _FAILED.clear()


def _manifest(url: str) -> dict[str, Any]:
    """The repository manifest: fetched once per process, kept for offline use."""
    with _MANIFEST_GUARD:
        if url in _MANIFESTS:
            return _MANIFESTS[url]
    local = download_root() / MANIFEST
    if knobs.offline and _is_network(url):
        cached = read_manifest(download_root())
        if cached is None:
            raise ArtifactError(
                f"EMBER_OFFLINE=1 and the artifact manifest {url}/{MANIFEST} was never fetched "
                f"(missing: {local}). Run `ember artifacts fetch` where the network is reachable "
                "and copy the cache, point EMBER_PREBUILT_PATH at a prebuilt tree, or unset "
                "EMBER_ARTIFACT_URL to compile locally."
            )
        return cached

    def attempt() -> bytes:
        with _open(f"{url}/{MANIFEST}") as resp:
            return bytes(resp.read())

    failed = _FAILED.get(url)
    if failed is not None:
        raise ArtifactError(f"{failed} (not retried again in this process)")
    try:
        raw = _retrying(f"{url}/{MANIFEST}", "fetching the artifact manifest", attempt)
    except ArtifactError as exc:
        # NOTE: remember it, so an unreachable repository costs its retries once, not per module.
        with _MANIFEST_GUARD:
            _FAILED[url] = exc
        raise
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ArtifactError(f"{url}/{MANIFEST} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("modules"), list):
        raise ArtifactError(f"{url}/{MANIFEST} is not an ember manifest (no 'modules' list)")
    if data.get("ember") != __version__ and not knobs.skip_version_check:
        raise ArtifactError(
            f"{url}/{MANIFEST} is for ember {data.get('ember')!r}, this is ember {__version__}; "
            "the repository is mislaid (each ember version has its own directory)"
        )
    atomic_write(local, json.dumps(data, indent=1, sort_keys=True))
    with _MANIFEST_GUARD:
        _MANIFESTS[url] = data
    return data


def _files(record: dict[str, Any]) -> list[_File]:
    """The files of a manifest record; each path must lie inside the record's directory."""
    base = PurePosixPath(str(record.get("path", "")))
    out = []
    for path, info in dict(record.get("files") or {}).items():
        p = PurePosixPath(path)
        if p.is_absolute() or ".." in p.parts or p.parent != base or not base.parts:
            raise ArtifactError(
                f"manifest entry {record.get('uri')!r}: file {path!r} is outside its module "
                f"directory {str(base)!r}; refusing it"
            )
        out.append(_File(path, str(info["sha256"]), int(info.get("size", 0))))
    if not out:
        raise ArtifactError(f"manifest entry {record.get('uri')!r} lists no files")
    return out


def _installed(root: Path, files: list[_File]) -> bool:
    return all((root / f.path).is_file() and file_sha256(root / f.path) == f.sha256 for f in files)


def _download(url: str, f: _File, staging: Path, verify: bool, progress: Progress) -> None:
    dest = staging / PurePosixPath(f.path).name
    src = f"{url}/{f.path}"

    def attempt() -> None:
        fd, tmp = tempfile.mkstemp(dir=staging, prefix=f".{dest.name}.", suffix=".part")
        got = 0
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out, _open(src) as resp:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
                    got += len(chunk)
                    progress.add(len(chunk))
            if verify and h.hexdigest() != f.sha256:
                raise ArtifactError(
                    f"artifact {f.path} from {src} failed verification: sha256 {h.hexdigest()} "
                    f"!= {f.sha256} recorded in the manifest ({got} bytes received); it was not "
                    "installed. The mirror holds a corrupted or tampered file."
                )
            os.replace(tmp, dest)
        except BaseException:
            progress.add(-got)
            Path(tmp).unlink(missing_ok=True)
            raise

    _retrying(src, f"downloading artifact {f.path}", attempt)
    progress.add(files=1)


def _install(url: str, records: Sequence[dict[str, Any]], stream: TextIO | None) -> list[Path]:
    """Download, verify and install ``records`` under :func:`download_root`; their dirs."""
    root = download_root()
    todo = [(r, _files(r)) for r in records]
    todo = [(r, fs) for r, fs in todo if not _installed(root, fs)]
    verify = knobs.artifact_verify
    if todo and not verify:
        logger.warning(
            "EMBER_ARTIFACT_VERIFY=0: %d file(s) from %s are installed WITHOUT checksum "
            "verification; a debugging aid only, unset it",
            sum(len(fs) for _, fs in todo),
            url,
        )
    if todo and knobs.offline and _is_network(url):
        missing = ", ".join(f"{url}/{f.path}" for _, fs in todo for f in fs)
        raise ArtifactError(
            f"EMBER_OFFLINE=1: artifact(s) {missing} are not in {root} and may not be "
            "downloaded. Run `ember artifacts fetch` where the network is reachable and copy "
            "the cache, or point EMBER_PREBUILT_PATH at a prebuilt tree."
        )
    jobs = [(rec, f) for rec, fs in todo for f in fs]
    progress = Progress(len(jobs), sum(f.size for _, f in jobs), stream)
    staging: dict[str, Path] = {}
    for rec, _ in todo:
        parent = root / PurePosixPath(str(rec["path"])).parent
        parent.mkdir(parents=True, exist_ok=True)
        staging[str(rec["path"])] = Path(
            tempfile.mkdtemp(dir=parent, prefix=f".staging-{os.getpid()}-")
        )
    try:
        with ThreadPoolExecutor(max_workers=knobs.download_workers) as pool:
            futures = [
                pool.submit(_download, url, f, staging[str(rec["path"])], verify, progress)
                for rec, f in jobs
            ]
            wait(futures, return_when=FIRST_EXCEPTION)
            for fut in futures:
                fut.cancel()  # NOTE: after a failure, start nothing new; running ones finish
        errors = [e for fut in futures if not fut.cancelled() and (e := fut.exception())]
        if errors:
            raise errors[0]
        for rec, _ in todo:
            publish(staging.pop(str(rec["path"])), root / str(rec["path"]))
    finally:
        progress.close()
        for d in staging.values():
            shutil.rmtree(d, ignore_errors=True)
    return [root / str(r["path"]) for r in records]


def _select(
    manifest: dict[str, Any], pattern: str | None, archs: Sequence[Arch] | None
) -> list[dict[str, Any]]:
    out = []
    for rec in manifest["modules"]:
        uri, family = str(rec.get("uri")), str(rec.get("family", ""))
        if pattern and not (fnmatch.fnmatch(uri, pattern) or fnmatch.fnmatch(family, pattern)):
            continue
        if archs and rec.get("toolchain") == "cuda":
            built = [parse_arch(t) for t in rec.get("targets", [])]
            if not all(any(b.covers(a) for b in built) for a in archs):
                continue
        out.append(rec)
    return out


def fetch(
    pattern: str | None = None,
    archs: Iterable[str] | None = None,
    *,
    stream: TextIO | None = None,
) -> list[Path]:
    """``ember artifacts fetch``: install every matching module of the repository locally.

    Parameters
    ----------
    pattern:
        Glob over uris or families (``None``: all).
    archs:
        Only CUDA modules whose targets cover all of these (host modules always qualify).
    stream:
        Where the progress bar goes (stderr by default; drawn only on a terminal).

    Raises
    ------
    ArtifactError
        No repository is configured, a file is missing, unreachable or fails verification, or
        ``EMBER_OFFLINE=1`` and something is not present locally.
    """
    url = repository_url()
    if url is None:
        raise ArtifactError(
            "no artifact repository is configured: set EMBER_ARTIFACT_URL to a repository URL, "
            "a trusted mirror, or a local directory holding `<ember version>/manifest.json`"
        )
    wanted = [parse_arch(a) for a in archs] if archs is not None else None
    records = _select(_manifest(url), pattern, wanted)
    if not records:
        raise ArtifactError(
            f"the artifact manifest at {url} has no module matching ops={pattern!r} "
            f"arch={[str(a) for a in wanted or []]}"
        )
    return _install(url, records, stream)


def fetch_for(r: Resolved) -> Path | None:
    """The download step of the lookup: the module for ``r`` from the repository, or ``None``.

    ``None`` when no repository is set, it has no such module, or its copy does not match (one
    warning). Raises :class:`ArtifactError` when the module should come from the repository but
    cannot (offline, unreachable, failed verification).
    """
    url = repository_url()
    if url is None:
        return None
    records = [m for m in _manifest(url)["modules"] if m.get("uri") == r.spec.uri]
    if not records:
        logger.info("module %s is not in the artifact repository %s", r.spec.uri, url)
        return None
    rejected = []
    for rec in records:
        problems = mismatches(rec, r)
        if not problems:
            logger.info("fetching prebuilt module %s from %s", r.spec.uri, url)
            _install(url, [rec], stream=None)
            so, why = find_prebuilt(download_root(), r)
            if so is not None:
                return so
            problems = why
        rejected.append(f"{url}/{rec.get('path')}: {'; '.join(problems)}")
    warn_skipped(r, rejected)
    return None

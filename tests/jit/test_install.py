"""A read-only, non-editable install works end to end and gains not one file (R2.6, R2.7)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from .helpers import REPO, pythonpath


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_read_only_install_writes_nothing_under_the_package(tmp_path: Path) -> None:
    # NOTE: build from a copy: setuptools writes build/ and *.egg-info into the source tree.
    src = tmp_path / "src"
    skip = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(REPO, src, ignore=skip)
    site = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(src)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    pkg = site / "ember"
    assert (pkg / "csrc" / "ops" / "toy_host.cc").is_file(), (
        "kernel sources must ship as package data"
    )
    for p in [pkg, *pkg.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    before = _snapshot(pkg)
    env = dict(os.environ)
    env.update(
        PYTHONPATH=pythonpath(site),
        PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"),  # the interpreter's .pyc, not ember's
        EMBER_CACHE_DIR=str(tmp_path / "cache"),
    )
    code = (
        "import torch, ember, ember.ops.toy as toy\n"
        f"assert ember.__file__.startswith({str(site)!r}), ember.__file__\n"
        "a = torch.randn(64); b = torch.randn(64)\n"
        "out = toy.axpy(a, b, alpha=3.0)\n"
        "torch.testing.assert_close(out, a + 3.0 * b)\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert _snapshot(pkg) == before, "files appeared or changed under the installed package"
    assert list((tmp_path / "cache" / "jit").iterdir()), "the module should live in EMBER_CACHE_DIR"

"""Prebuilt helpers that need no compiler: arch tags, progress bar, loader log level (R7.8)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from ember.config import knobs
from ember.errors import ConfigError
from ember.jit.artifacts import Progress, repository_url
from ember.jit.build import apply_log_level
from ember.jit.key import source_hash
from ember.jit.prebuilt import arch_tag, read_manifest


def test_arch_tag_is_a_pep440_local_label() -> None:
    assert arch_tag(["9.0a", "8.0"]) == "sm80.sm90a"
    assert arch_tag(("10.0a", "10.0a")) == "sm100a"
    with pytest.raises(ConfigError, match="'hopper'"):
        arch_tag(["hopper"])


def test_source_hash_ignores_order_only() -> None:
    a = [["a.cu", "1" * 64], ["b.h", "2" * 64]]
    assert source_hash(a) == source_hash(list(reversed(a)))
    assert source_hash(a) != source_hash([["a.cu", "1" * 64], ["b.h", "3" * 64]])


def test_repository_url_appends_the_version() -> None:
    import ember

    assert repository_url() is None
    with knobs.scope(artifact_url="https://mirror.example/ember/"):
        assert repository_url() == f"https://mirror.example/ember/{ember.__version__}"
    with knobs.scope(artifact_url="/srv/artifacts"):
        assert repository_url() == f"file:///srv/artifacts/{ember.__version__}"


def test_progress_bar_draws_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    Progress(3, 300, quiet).add(100, files=1)
    assert quiet.getvalue() == ""
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    bar = Progress(2, 2_000_000, tty)
    bar.add(1_000_000, files=1)
    bar.close()
    assert "1/2 files 1.0/2.0 MB" in tty.getvalue() and tty.getvalue().endswith("\n")
    assert "#" * 15 + " " * 15 in tty.getvalue()


def test_malformed_manifest_names_the_file(tmp_path: Path) -> None:
    root = tmp_path
    assert read_manifest(root) is None
    (root / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"manifest\.json is not valid JSON"):
        read_manifest(root)
    (root / "manifest.json").write_text('{"schema": 7}')
    with pytest.raises(ConfigError, match="schema 7"):
        read_manifest(root)


def test_loader_log_level_is_its_own_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    """EMBER_JIT_LOGLEVEL sets the ember.jit logger only, not ember's API logging (R7.8)."""
    jit = logging.getLogger("ember.jit")
    before = (jit.level, list(jit.handlers))
    parent = logging.getLogger("ember").level
    try:
        apply_log_level()
        assert jit.level == before[0], "unset: the application's logging config rules"
        monkeypatch.setenv("EMBER_JIT_LOGLEVEL", "DEBUG")
        apply_log_level()
        assert jit.level == logging.DEBUG
        assert logging.getLogger("ember").level == parent
    finally:
        jit.setLevel(before[0])
        jit.handlers[:] = before[1]

"""Arch parsing, family filters and the arch context (R2.12-R2.15)."""

from __future__ import annotations

import pytest

from ember.config import knobs
from ember.errors import ConfigError, ToolchainError, UnsupportedError
from ember.jit.arch import Arch, ArchContext, family_matches, parse_arch


def test_parse_keeps_suffix() -> None:
    assert parse_arch("9.0a") == Arch(9, 0, "a")
    assert parse_arch("8.0") == Arch(8, 0, "")
    assert parse_arch("9.0a").gencode == "-gencode=arch=compute_90a,code=sm_90a"
    assert parse_arch("10.0a").sm == "sm_100a"
    with pytest.raises(ConfigError):
        parse_arch("sm90")


@pytest.mark.parametrize(
    ("family", "arch", "ok"),
    [
        ("sm90a", "9.0a", True), ("sm90a", "9.0", False), ("sm90", "9.0a", True),
        ("sm80+", "8.0", True), ("sm80+", "9.0a", True), ("sm80+", "7.5", False),
        ("sm100a", "9.0a", False), ("sm75+", "10.0a", True),
    ],
)  # fmt: skip
def test_family_matches(family: str, arch: str, ok: bool) -> None:
    assert family_matches(family, parse_arch(arch)) is ok


def test_context_from_list_filters_per_spec() -> None:
    with knobs.scope(cuda_arch_list=("8.0", "9.0a")):
        ctx = ArchContext.current()
    assert ctx.explicit
    assert ctx.targets_for("m", ["sm90a"]) == (Arch(9, 0, "a"),)
    assert ctx.targets_for("m", ["sm80+"]) == (Arch(8, 0), Arch(9, 0, "a"))
    with pytest.raises(UnsupportedError) as info:
        ctx.targets_for("m", ["sm100a"])
    assert "sm100a" in str(info.value) and "8.0" in str(info.value) and "9.0a" in str(info.value)


def test_no_devices_no_list_raises_for_cuda() -> None:
    ctx = ArchContext(requested=(), explicit=False)
    with pytest.raises(ToolchainError, match=r"EMBER_CUDA_ARCH_LIST=9\.0a"):
        ctx.targets_for("m", ["sm80+"])


@pytest.mark.parametrize(
    ("built", "device", "ok"),
    [
        ("8.0", "8.0", True), ("8.0", "8.6", True), ("8.6", "8.0", False), ("8.0", "9.0a", False),
        ("9.0a", "9.0a", True), ("9.0a", "9.0", True), ("9.0", "9.0a", True),
        ("10.0f", "10.3", True), ("10.0a", "10.3a", False), ("9.0a", "10.0a", False),
    ],
)  # fmt: skip
def test_covers_follows_binary_compatibility(built: str, device: str, ok: bool) -> None:
    """SASS runs on its major with minor >= its own; ``a`` code on its exact arch (R5.14)."""
    assert parse_arch(built).covers(parse_arch(device)) is ok

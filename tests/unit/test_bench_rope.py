"""The ``rope`` bench routine on the CPU: its reference and cache, bytes, shapes (R4.14-R4.16)."""

from __future__ import annotations

import argparse

import pytest

from ember.bench import routines
from ember.bench.routines.rope import _case, cos_sin_cache, torch_rope_

torch = pytest.importorskip("torch")


def test_cache_holds_cos_then_sin_of_position_times_inv_freq() -> None:
    cache = cos_sin_cache(10, 8, theta=100.0)
    inv = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    ang = 7 * inv
    torch.testing.assert_close(
        cache[7].double(), torch.cat((ang.cos(), ang.sin())), rtol=1e-6, atol=1e-6
    )


def test_reference_rotates_neox_halves_and_keeps_norms() -> None:
    q = torch.randn(5, 3, 16, dtype=torch.float64)
    k = torch.randn(5, 1, 16, dtype=torch.float64)
    q0 = q.clone()
    torch_rope_(q, k, torch.tensor([0, 1, 2, 3, 4]), cos_sin_cache(8, 16).double())
    torch.testing.assert_close(q[0], q0[0])  # position 0: no rotation (up to fp32 rounding)
    pairs = lambda t: t[..., :8] ** 2 + t[..., 8:] ** 2  # noqa: E731
    torch.testing.assert_close(
        pairs(q), pairs(q0), rtol=1e-5, atol=1e-5
    )  # lengths kept (fp32 math)


def test_case_bytes_and_reference_shape() -> None:
    case = _case(argparse.Namespace(device="cpu"), (4, 8, 2, 64), "bf16")  # type: ignore[arg-type]
    assert case.nbytes == 2 * 4 * 10 * 64 * 2 + 4 * (64 * 4 + 8)
    q, k = case.reference(case.make_inputs())
    assert q.shape == (4, 8, 64) and k.shape == (4, 2, 64)


def test_shapes_parse_and_reject() -> None:
    p = argparse.ArgumentParser()
    routines.get_routine("rope").add_arguments(p)
    assert p.parse_args(["--shapes", "8x32x8x128"]).shapes == [(8, 32, 8, 128)]
    with pytest.raises(SystemExit):
        p.parse_args(["--shapes", "8x32x8x127"])

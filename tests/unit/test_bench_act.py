"""The gated-activation bench routines on the CPU: references, bytes, shapes (R4.14-R4.16)."""

from __future__ import annotations

import argparse
import math

import pytest

from ember.bench import routines
from ember.bench.routines.act import OPS, _case, torch_act_and_mul

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("op", OPS)
def test_reference_is_the_gated_activation_by_hand(op: str) -> None:
    case = _case(op, argparse.Namespace(device="cpu"), (3, 5), "fp32")  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (got,) = case.reference(inputs)
    x = inputs["x"].double()
    g, u = x[:, :5], x[:, 5:]
    act = {
        "silu_and_mul": g / (1 + torch.exp(-g)),
        "gelu_and_mul": 0.5 * g * (1 + torch.erf(g / math.sqrt(2))),
        "gelu_tanh_and_mul": 0.5
        * g
        * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3))),
    }[op]
    torch.testing.assert_close(got.double(), act * u, rtol=1e-5, atol=1e-5)
    assert case.nbytes == 3 * 3 * 5 * 4  # x read (2d wide), out written (d wide)


def test_eager_formulation_halves_the_last_dimension() -> None:
    x = torch.randn(2, 3, 8)
    assert torch_act_and_mul("silu_and_mul", x).shape == (2, 3, 4)


@pytest.mark.parametrize("op", OPS)
def test_shapes_parse_and_reject(op: str) -> None:
    p = argparse.ArgumentParser()
    routines.get_routine(op).add_arguments(p)
    assert p.parse_args(["--shapes", "8x14336,1x7"]).shapes == [(8, 14336), (1, 7)]
    with pytest.raises(SystemExit):
        p.parse_args(["--shapes", "8x0"])
    with pytest.raises(SystemExit):
        p.parse_args(["--shapes", "8x2x3"])

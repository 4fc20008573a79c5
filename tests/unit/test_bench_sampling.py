"""The ``softmax`` bench routine on the CPU: reference, bytes, shapes (R4.14-R4.16)."""

from __future__ import annotations

import argparse

import pytest

from ember.bench import routines
from ember.bench.routines.sampling import _case, torch_softmax

torch = pytest.importorskip("torch")


def test_reference_is_the_temperature_softmax_and_rows_sum_to_one() -> None:
    case = _case(argparse.Namespace(device="cpu"), (3, 50), "fp32")  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (want,) = case.reference(inputs)
    torch.testing.assert_close(want, torch_softmax(inputs["logits"], inputs["temperature"]))
    torch.testing.assert_close(want.sum(-1), torch.ones(3))
    assert case.nbytes == 3 * 50 * (4 + 4) + 3 * 4


def test_shapes_parse_and_reject() -> None:
    p = argparse.ArgumentParser()
    routines.get_routine("softmax").add_arguments(p)
    assert p.parse_args(["--shapes", "128x128256"]).shapes == [(128, 128256)]
    with pytest.raises(SystemExit):
        p.parse_args(["--shapes", "128"])

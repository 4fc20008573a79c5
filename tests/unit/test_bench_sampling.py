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


def test_sampling_case_checks_the_support_of_each_draw() -> None:
    from ember.bench.routines.sampling import _sample_case

    case = _sample_case(argparse.Namespace(device="cpu"), (4, 30), "fp32")  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (want,) = case.reference(inputs)
    good = torch.multinomial(inputs["probs"], 1)
    assert torch.equal(case.outputs(inputs, good)[0], want)
    bad = torch.zeros(4, 1, dtype=torch.long)  # token 0 has probability 0 in every row
    assert not torch.equal(case.outputs(inputs, bad)[0], want)

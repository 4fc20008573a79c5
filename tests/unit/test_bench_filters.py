"""The filter bench routines and the kept-set reference on the CPU (R4.14-R4.16)."""

from __future__ import annotations

import argparse

import pytest

from ember.bench import routines
from ember.bench.routines.filters import OPS, _case, torch_renorm, torch_top_k_mask
from ember.testing.reference import filter_threshold_ref

torch = pytest.importorskip("torch")
CTX = argparse.Namespace(device="cpu")


def test_every_op_is_a_routine_and_an_ember_function() -> None:
    import ember

    for name in OPS:
        assert routines.get_routine(name).name == name
        assert callable(getattr(ember, name))


def test_reference_threshold_by_hand() -> None:
    p = torch.tensor([[0.05, 0.3, 0.0, 0.2, 0.15, 0.1, 0.2]])
    assert filter_threshold_ref(p, top_k=3).item() == pytest.approx(0.2)  # ties kept
    assert filter_threshold_ref(p, top_k=0).item() == float("-inf")  # off
    assert filter_threshold_ref(p, top_p=0.6).item() == pytest.approx(0.2)  # 0.3+0.2+0.2
    assert filter_threshold_ref(p, top_p=0.0).item() == pytest.approx(0.3)  # the maximum
    assert filter_threshold_ref(p, top_p=1.0).item() == float("-inf")
    assert filter_threshold_ref(p, min_p=0.5).item() == pytest.approx(0.15)
    # top-k first: {0.3, 0.2, 0.2, 0.15} (0.85), then 80 % of it (0.68): 0.3 + 0.2 + 0.2
    assert filter_threshold_ref(p, top_k=4, top_p=0.8).item() == pytest.approx(0.2)
    logits = torch.tensor([[-1.0, 3.0, float("-inf"), 2.0, 2.0]])
    assert filter_threshold_ref(logits, top_k=2, mass=False).item() == 2.0


def test_renorm_cases_match_the_torch_formulation() -> None:
    # the sort-and-cumsum formulation users write keeps the same set as the exact definition
    # on inputs without near-boundary sums
    for name in ("top_k_renorm_probs", "top_p_renorm_probs"):
        case = _case(name, OPS[name], CTX, (6, 300), "fp32")  # type: ignore[arg-type]
        inputs = case.make_inputs()
        (want,) = case.reference(inputs)
        got = torch_renorm(inputs["x"], **OPS[name].params)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-8)
        assert case.nbytes == 2 * 6 * 300 * 4


def test_mask_case_matches_topk() -> None:
    case = _case("top_k_mask_logits", OPS["top_k_mask_logits"], CTX, (4, 500), "fp32")  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (want,) = case.reference(inputs)
    got = torch_top_k_mask(inputs["x"], top_k=50)
    assert torch.equal(case.outputs(inputs, got)[0], want)
    assert int((want > -1e30).sum()) == 4 * 50 and bool(want.isfinite().all())


@pytest.mark.parametrize("name", ["top_p_sampling_from_probs", "top_k_top_p_sampling_from_logits"])
def test_sampler_support_check_accepts_kept_and_rejects_dropped_tokens(name) -> None:
    op = OPS[name]
    case = _case(name, op, CTX, (4, 400), "fp32")  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (want,) = case.reference(inputs)
    x = inputs["x"]
    probs = torch.softmax(x.double(), -1).float() if op.logits else x
    best = probs.argmax(-1)
    assert torch.equal(case.outputs(inputs, best)[0], want)
    worst = probs.argmin(-1)  # never in a top-p 0.9 set of a peaked row
    assert not bool(case.outputs(inputs, worst)[0].any())
    assert not bool(case.outputs(inputs, torch.full((4,), -1))[0].any())

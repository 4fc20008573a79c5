"""The ``decode`` bench routine on the CPU: shapes, lengths, bytes, backends (R4.14-R4.16)."""

from __future__ import annotations

import argparse
import statistics

import pytest

from ember.bench import routines
from ember.bench.routines.decode import _case, decode_lengths, parse_decode_shape
from tests.unit.test_bench import no_peers, run  # noqa: F401 (fixture)

pytest.importorskip("torch")


def test_shape_parsing() -> None:
    assert parse_decode_shape("64x4096x32x8x128x16") == (64, 4096, 32, 8, 128, 16)
    with pytest.raises(ValueError, match="expected 6 positive integers"):
        parse_decode_shape("64x4096x32")
    with pytest.raises(ValueError, match="HQ=30 is not a multiple of HK=8"):
        parse_decode_shape("1x1x30x8x128x16")
    with pytest.raises(ValueError, match="expected BxLxHQxHKxDxP integers"):
        parse_decode_shape("ax1x1x1x1x1")


def test_lengths_uniform_and_pareto() -> None:
    assert decode_lengths(3, 100, "uniform") == [100, 100, 100]
    skewed = decode_lengths(4096, 1024, "pareto")
    assert skewed == decode_lengths(4096, 1024, "pareto")  # seeded: the same batch every run
    assert max(skewed) <= 16 * 1024 and min(skewed) >= 1
    assert 0.6 * 1024 < statistics.mean(skewed) < 1.4 * 1024
    assert max(skewed) > 8 * statistics.median(skewed)  # skewed indeed


def test_bytes_count_every_attended_kv_row_once() -> None:
    args = argparse.Namespace(kv_dtype="same", lengths="uniform", layout="NHD")
    ctx = argparse.Namespace(device="cpu")
    case = _case(ctx, (2, 40, 8, 2, 64, 16), "bf16", args)  # type: ignore[arg-type]
    kv = 2 * 40 * 2 * 64 * 2 * 2  # requests x tokens x kv heads x dim x (K, V) x bytes
    qo = 2 * 2 * 8 * 64 * 2  # q read + out written
    pages = 2 * 3 * 4
    assert case.nbytes == kv + qo + pages
    args.kv_dtype = "e4m3"
    assert _case(ctx, (2, 40, 8, 2, 64, 16), "bf16", args).nbytes == kv // 2 + qo + pages  # type: ignore[arg-type]


def test_reference_of_a_case_is_attention_over_its_pages() -> None:
    torch = pytest.importorskip("torch")
    args = argparse.Namespace(kv_dtype="same", lengths="uniform", layout="HND")
    case = _case(argparse.Namespace(device="cpu"), (2, 20, 4, 2, 64, 8), "bf16", args)  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (out,) = case.reference(inputs)
    # request 0 by hand: its pages in order, HND -> tokens, GQA group 2
    pages = inputs["indices"][inputs["h_indptr"][0] : inputs["h_indptr"][1]].long()
    k = inputs["cache"][pages, 0].float().transpose(1, 2).reshape(-1, 2, 64)[:20]
    v = inputs["cache"][pages, 1].float().transpose(1, 2).reshape(-1, 2, 64)[:20]
    q = inputs["q"][0].float()
    logits = torch.einsum("hd,thd->ht", q, k.repeat_interleave(2, 1)) / 8.0
    want = torch.einsum("ht,thd->hd", logits.softmax(-1), v.repeat_interleave(2, 1))
    torch.testing.assert_close(out[0].float(), want, rtol=2e-2, atol=2e-2)


def test_routine_is_registered_with_both_flashinfer_paths() -> None:
    r = routines.get_routine("decode")
    assert r.backends == {"ember": ("default",), "flashinfer": ("cuda_cores", "tensor_cores")}


def test_flashinfer_rows_say_why_they_are_skipped(no_peers: None) -> None:  # noqa: F811
    rows = run(["decode", "--backends", "flashinfer", "--shapes", "2x32x4x2x64x16"])
    assert [r.label for r in rows] == ["flashinfer[cuda_cores]", "flashinfer[tensor_cores]"]
    assert all(r.status.startswith("skipped: flashinfer is not importable") for r in rows)
    assert "--shapes 2x32x4x2x64x16 --dtypes bf16 --kv-dtype same --lengths uniform" in rows[0].cmd


def test_append_case_reference_writes_each_token_to_its_slot() -> None:
    torch = pytest.importorskip("torch")
    from ember.bench.routines.decode import _append_case

    args = argparse.Namespace(layout="NHD")
    case = _append_case(argparse.Namespace(device="cpu"), (2, 20, 2, 64, 16), "bf16", args)  # type: ignore[arg-type]
    assert case.nbytes == 2 * 2 * 40 * 2 * 64 * 2 + 4 * 2 * 40
    i = case.make_inputs()
    (cache,) = case.reference(i)
    assert torch.count_nonzero(i["cache"]) == 0  # the reference works on a copy
    # token 17 of request 1: page indices[indptr[1] + 1], slot 1
    page = int(i["indices"][int(i["indptr"][1]) + 1])
    assert torch.equal(cache[page, 0, 1], i["k"][20 + 17])
    assert torch.equal(cache[page, 1, 1], i["v"][20 + 17])
    assert int(torch.count_nonzero(cache.abs().sum(-1).sum(-1))) == 2 * 40  # K and V rows


def test_append_routine_is_registered() -> None:
    r = routines.get_routine("append_kv")
    assert r.backends == {"ember": ("default",), "flashinfer": ("default",)}


def test_merge_states_reference_merges_by_natural_log_lse() -> None:
    torch = pytest.importorskip("torch")
    from ember.bench.routines.decode import _merge_case

    ctx = argparse.Namespace(device="cpu")
    case = _merge_case(ctx, (3, 2, 4, 16), "fp32", argparse.Namespace())  # type: ignore[arg-type]
    inputs = case.make_inputs()
    (out,) = case.reference(inputs)
    v, s = inputs["v"].double(), inputs["s"].double()
    # two states by hand: weights e^{s_i} / (e^{s_0} + e^{s_1})
    w0 = 1.0 / (1.0 + torch.exp(s[:, 1] - s[:, 0]))
    want = w0[..., None] * v[:, 0] + (1 - w0[..., None]) * v[:, 1]
    torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-6)
    assert case.nbytes == 3 * 4 * (2 * (16 * 4 + 4) + 16 * 4 + 4)


def test_merge_states_shapes_parse_and_reject() -> None:
    p = argparse.ArgumentParser()
    routines.get_routine("merge_states").add_arguments(p)
    assert p.parse_args(["--shapes", "8x2x4x64"]).shapes == [(8, 2, 4, 64)]
    with pytest.raises(SystemExit):
        p.parse_args(["--shapes", "8x2x4"])
